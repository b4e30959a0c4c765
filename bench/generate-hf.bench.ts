/**
 * Generation against Hugging Face transformers' `generate` (PyTorch CPU, float32): the same checkpoint
 * directory, prompt lengths, batch sizes, new tokens, T = 1 sampling (top-k / top-p off, no stop token)
 * and intra-op thread count, each case on each side in its own process so every peak RSS is that
 * process's own. Our generator runs twice on the small model: with the chunked prefill (now) and with
 * the whole prompt in one pass (the graph before chunking).
 *
 *   npm run bench:generate-hf                                 # sqlenv-tiny only
 *   npm run bench:generate-hf -- --qwen3-0.6b [DIR]           # also Qwen3-0.6B shapes, batch 8 × 1,024
 *   npm run bench:generate-hf -- --threads 2                  # default 1
 *
 * DIR defaults to .cache/bench/qwen3-0.6b-random, written (random BF16 weights, seed 0) when missing.
 * The Python side runs with SQLENV_PYTHON (default python3); without torch and transformers it is
 * skipped with a message. Writes <results dir>/generate-hf.md and .json after every case.
 *
 *   BENCH_RESULTS_DIR=/tmp/r BENCH_GENERATE_HF_SMALLEST=1 npm run bench:generate-hf   # smallest: one tiny case
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_PREFILL_CHUNK_TOKENS, presetConfig, writeRandomCheckpoint } from '@sqlenv/model';
import { loadAverage1mNow, runChild, startBench, stringArg } from './lib/harness.ts';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const PYTHON = process.env['SQLENV_PYTHON'] ?? 'python3';
const THREADS = Number(stringArg('--threads') ?? 1);
const SMALLEST = process.env['BENCH_GENERATE_HF_SMALLEST'] === '1';
const QWEN_DIR = process.argv.includes('--qwen3-0.6b') ? (stringArg('--qwen3-0.6b') ?? `${ROOT}.cache/bench/qwen3-0.6b-random`) : undefined;

interface Case {
  model: string;
  dir: string;
  batch: number;
  promptTokens: number;
  newTokens: number;
  /** Timed runs after a warm-up; 0: one run, timed (the big case, once). */
  repeats: number;
  /** Also run the whole-prompt graph (cheap only on the small model). */
  unchunked: boolean;
}
interface SideResult {
  tokensPerS: number;
  generateMs: number;
  loadMs: number;
  loadedRssBytes: number;
  maxRssBytes: number;
  [key: string]: unknown;
}

const cases: Case[] = [];
for (const [promptTokens, newTokens] of [
  [16, 64], // decode-heavy
  [600, 16], // prefill-heavy
].slice(0, SMALLEST ? 1 : 2) as [number, number][]) {
  for (const batch of SMALLEST ? [1] : [1, 8, 32]) cases.push({ model: 'sqlenv-tiny', dir: `${ROOT}models/sqlenv-tiny`, batch, promptTokens, newTokens, repeats: 2, unchunked: true });
}
if (QWEN_DIR !== undefined) {
  if (!existsSync(`${QWEN_DIR}/config.json`)) writeRandomCheckpoint(QWEN_DIR, presetConfig('qwen3-0.6b'), { dtype: 'BF16' });
  cases.push({ model: 'Qwen3-0.6B shapes (random)', dir: QWEN_DIR, batch: 8, promptTokens: 1024, newTokens: 16, repeats: 0, unchunked: false });
}

const pythonCheck = spawnSync(PYTHON, ['-c', 'import torch, transformers'], { encoding: 'utf8' });
const pythonSkip = pythonCheck.status === 0 ? undefined : `transformers side skipped: ${PYTHON} cannot import torch and transformers (set SQLENV_PYTHON)`;
if (pythonSkip !== undefined) process.stderr.write(`${pythonSkip}\n`);

const lastJsonLine = (stdout: string): SideResult => JSON.parse(stdout.trim().split('\n').at(-1) as string) as SideResult;
const ours = (c: Case, prefillChunkTokens: number | null): SideResult => {
  const payload = { dir: c.dir, batch: c.batch, promptTokens: c.promptTokens, newTokens: c.newTokens, threads: THREADS, repeats: c.repeats, prefillChunkTokens };
  return runChild(`${ROOT}bench/generate-hf-probe.ts`, payload, { execArgv: ['--expose-gc'] }) as SideResult;
};
const theirs = (c: Case): SideResult | undefined => {
  if (pythonSkip !== undefined) return undefined;
  const payload = JSON.stringify({ dir: c.dir, batch: c.batch, promptTokens: c.promptTokens, newTokens: c.newTokens, threads: THREADS, repeats: c.repeats });
  return lastJsonLine(execFileSync(PYTHON, [`${ROOT}bench/python/hf_generate.py`, payload], { encoding: 'utf8', maxBuffer: 1 << 24, stdio: ['ignore', 'pipe', 'ignore'] }));
};

const bench = startBench('generate-hf');
const gb = (bytes: number): string => `${(bytes / 1e9).toFixed(2)} GB`;
const ratio = (a: number, b: number | undefined): string => (b === undefined ? '–' : `${(a / b).toFixed(2)}×`);
type Row = Case & { loadAverage: number; sqlenv: SideResult; sqlenvWholePrompt: SideResult | null; transformers: SideResult | null };
const rows: Row[] = [];
for (const c of cases) {
  const loadAverage = loadAverage1mNow();
  process.stderr.write(`${c.model} batch ${c.batch}, ${c.promptTokens} + ${c.newTokens} tokens (load ${loadAverage})\n`);
  const hf = theirs(c);
  const chunked = ours(c, DEFAULT_PREFILL_CHUNK_TOKENS);
  const whole = c.unchunked ? ours(c, null) : undefined;
  // The checkpoint directory as the repository sees it: results name no machine's paths.
  rows.push({ ...c, dir: relative(ROOT, resolve(c.dir)) || '.', loadAverage, sqlenv: chunked, sqlenvWholePrompt: whole ?? null, transformers: hf ?? null });
  // Written after every case: the big one takes long on shared cores, and what was measured is kept.
  bench.write({ title: 'Generation against Hugging Face transformers (CPU)', body: page(), data: { threads: THREADS, prefillChunkTokens: DEFAULT_PREFILL_CHUNK_TOKENS, pythonSkip: pythonSkip ?? null, rows } });
}
process.stdout.write(page().join('\n'));

function page(): string[] {
  return [
    `${THREADS} intra-op thread(s) on both sides.`,
    '',
    pythonSkip ?? `transformers ${rows.find((r) => r.transformers)?.transformers?.['version'] ?? '?'}, torch ${rows.find((r) => r.transformers)?.transformers?.['torch'] ?? '?'}, attention \`${rows.find((r) => r.transformers)?.transformers?.['attention'] ?? '?'}\`, float32.`,
    '',
    `Both sides: the same checkpoint directory, equal-length prompts of the same ids (no padding), T = 1 sampling with top-k and top-p off,`,
    'no stop token (every row gets exactly the new tokens). Tokens/s = rows × new tokens ÷ the `generate` call (prefill included);',
    'best of 2 runs after a warm-up, except the Qwen3 case (one run each). Peak RSS is each process\'s own (`ru_maxrss`: loading included).',
    `Ours: the generation graph with the chunked prefill (each layer takes ${DEFAULT_PREFILL_CHUNK_TOKENS} queries at a time; the cache is held once), "whole prompt"`,
    'the same graph with all the prompt\'s queries at once; ORT session loaded from a model file with prepacking off, as the engine does for big models.',
    '',
    '| model | batch | prompt + new | ours tokens/s | transformers tokens/s | ours ÷ transformers | ours, whole prompt, tokens/s | ours peak RSS | transformers peak RSS | RSS ratio | ours whole-prompt peak RSS | load avg |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...rows.map((r) => {
      const hf = r.transformers ?? undefined;
      return `| ${r.model} | ${r.batch} | ${r.promptTokens} + ${r.newTokens} | ${r.sqlenv.tokensPerS} | ${hf?.tokensPerS ?? '–'} | ${ratio(r.sqlenv.tokensPerS, hf?.tokensPerS)} | ${r.sqlenvWholePrompt?.tokensPerS ?? '–'} | ${gb(r.sqlenv.maxRssBytes)} | ${hf ? gb(hf.maxRssBytes) : '–'} | ${ratio(r.sqlenv.maxRssBytes, hf?.maxRssBytes)} | ${r.sqlenvWholePrompt ? gb(r.sqlenvWholePrompt.maxRssBytes) : '–'} | ${r.loadAverage} |`;
    }),
  ];
}
