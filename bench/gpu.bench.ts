/**
 * Generation on a GPU: our generation graph on an ONNX Runtime GPU provider (WebGPU by default: the
 * provider onnxruntime-node ships for Linux; CUDA needs its CUDA build) against Hugging Face
 * transformers' `generate` on the same GPU through PyTorch CUDA (float32, and bfloat16 for the big
 * model), on the same checkpoint directories, prompts, batch sizes, new tokens and T = 1 sampling.
 * It also answers the cache question of a provider without IO binding: is a kept KV cache, which
 * crosses host → device as feeds and back as outputs every turn, cheaper than prefilling the whole
 * context again? (docs/inference.md, "The engine on a GPU").
 *
 *   npm run bench:gpu                                   # sqlenv-tiny, provider webgpu
 *   npm run bench:gpu -- --qwen3-0.6b [DIR]             # also Qwen3-0.6B shapes (random weights)
 *   npm run bench:gpu -- --provider cuda --out DIR      # results to DIR (default: BENCH_RESULTS_DIR or bench/results)
 *   npm run bench:gpu -- --from-json OLD.json           # the report of an earlier run's gpu.json, nothing run
 *
 * Each side of each model runs in its own process with a time limit (SQLENV_BENCH_CASE_TIMEOUT_S,
 * default 240 s); what finished is written after every step. Without a GPU the provider's sessions
 * cannot be created and the bench says so. Writes gpu.md and gpu.json.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { presetConfig, writeRandomCheckpoint } from '@sqlenv/model';
import type { ProbeCase } from './gpu-probe.ts';
import { resultsDir, startBench, stringArg, type MachineRecord } from './lib/harness.ts';

const HERE = fileURLToPath(new URL('./', import.meta.url));
// Bundled (a GPU host without node_modules: `.mjs` files run from the repository root) or from source through tsx.
const BUNDLED = import.meta.url.endsWith('.mjs');
const ROOT = BUNDLED ? process.cwd() : resolve(HERE, '..');
const PYTHON = process.env['SQLENV_PYTHON'] ?? 'python3';
const CASE_TIMEOUT_MS = Number(process.env['SQLENV_BENCH_CASE_TIMEOUT_S'] ?? 240) * 1000;
const PROVIDER = stringArg('--provider') ?? 'webgpu';
const OUT = stringArg('--out') ?? (BUNDLED && process.env['BENCH_RESULTS_DIR'] === undefined ? `${ROOT}/bench/results` : resultsDir());
/** Re-render the report of an earlier run's gpu.json (nothing runs). */
const FROM_JSON = stringArg('--from-json');
/** `ours` or `transformers`: run one side only (default both). */
const ONLY = stringArg('--only');
const QWEN_DIR = process.argv.includes('--qwen3-0.6b') ? resolve(stringArg('--qwen3-0.6b') ?? `${ROOT}/.cache/bench/qwen3-0.6b-random`) : undefined;
const probeCommand = BUNDLED ? ['--expose-gc', `${HERE}gpu-probe.mjs`] : ['--expose-gc', '--import', 'tsx', `${HERE}gpu-probe.ts`];

interface ModelPlan {
  model: string;
  dir: string;
  repeats: number;
  /** transformers' timed runs after a warm-up (0: one cold run). */
  hfRepeats: number;
  cases: ProbeCase[];
  /** transformers' cases: some of the `generate` cases, each with a dtype (each case is a Python process of its own). */
  hf: (Omit<ProbeCase, 'kind'> & { dtype: string })[];
  /** Also run our side on the CPU provider with every core (a small model only). */
  cpuBaseline: boolean;
}

const plans: ModelPlan[] = [
  {
    model: 'sqlenv-tiny',
    dir: `${ROOT}/models/sqlenv-tiny`,
    repeats: 2,
    hfRepeats: 2,
    cases: [
      ...[1, 8, 32].map((batch) => ({ kind: 'generate' as const, batch, promptTokens: 16, newTokens: 64 })),
      ...[1, 8, 32].map((batch) => ({ kind: 'generate' as const, batch, promptTokens: 600, newTokens: 16 })),
      { kind: 'turns', batch: 8, promptTokens: 600, newTokens: 32, appendTokens: 100 },
    ],
    hf: [
      { batch: 1, promptTokens: 16, newTokens: 64, dtype: 'float32' },
      { batch: 32, promptTokens: 16, newTokens: 64, dtype: 'float32' },
      { batch: 32, promptTokens: 600, newTokens: 16, dtype: 'float32' },
    ],
    cpuBaseline: true,
  },
];
if (QWEN_DIR !== undefined) {
  if (FROM_JSON === undefined && !existsSync(`${QWEN_DIR}/config.json`)) writeRandomCheckpoint(QWEN_DIR, presetConfig('qwen3-0.6b'), { dtype: 'BF16' });
  plans.push({
    model: 'Qwen3-0.6B shapes (random)',
    dir: QWEN_DIR,
    repeats: 0,
    hfRepeats: 1,
    cases: [
      { kind: 'generate', batch: 8, promptTokens: 1024, newTokens: 32 },
      { kind: 'generate', batch: 32, promptTokens: 1024, newTokens: 32 },
      { kind: 'turns', batch: 8, promptTokens: 1024, newTokens: 16, appendTokens: 100 },
    ],
    hf: [
      { batch: 8, promptTokens: 1024, newTokens: 32, dtype: 'float32' },
      { batch: 32, promptTokens: 1024, newTokens: 32, dtype: 'float32' },
      { batch: 8, promptTokens: 1024, newTokens: 32, dtype: 'bfloat16' },
    ],
    cpuBaseline: false,
  });
}

const pythonCheck = FROM_JSON === undefined && ONLY !== 'ours' ? spawnSync(PYTHON, ['-c', 'import torch, transformers; assert torch.cuda.is_available(), "no CUDA device"'], { encoding: 'utf8' }) : undefined;
const pythonSkip = pythonCheck === undefined ? (ONLY === 'ours' ? 'transformers side not run (--only ours)' : undefined) : pythonCheck.status === 0 ? undefined : `transformers side skipped: ${PYTHON} has no torch, transformers or CUDA device (${(pythonCheck.stderr.trim().split('\n').at(-1) ?? '').slice(0, 200)})`;
if (pythonSkip !== undefined) process.stderr.write(`${pythonSkip}\n`);

/**
 * The last JSON line a child printed, or why there is none (exit code, signal, time limit) with the
 * steps it finished: the harness's runChild has no time limit with partial results, which a GPU case needs.
 */
const runCase = (command: string, args: string[]): Record<string, unknown> => {
  const started = performance.now();
  const child = spawnSync(command, args, { encoding: 'utf8', maxBuffer: 1 << 26, timeout: CASE_TIMEOUT_MS, stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = (child.stdout ?? '')
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  const last = lines.at(-1);
  if (child.status === 0 && last !== undefined && last['step'] === undefined) return last;
  const why = child.error?.message ?? (child.signal !== null ? `killed by ${child.signal}` : `exit code ${String(child.status)}`);
  // What a probe measured before it stopped: its session line and each finished case.
  const session = lines.find((l) => l['step'] === 'session');
  return {
    failed: `${why} after ${Math.round((performance.now() - started) / 1000)} s`,
    ...(session === undefined ? {} : { loadMs: session['loadMs'], session: session['session'] }),
    cases: lines.filter((l) => l['step'] === 'case').map((l) => l['case']),
  };
};

const gpuName = (): string => {
  try {
    return execFileSync('nvidia-smi', ['--query-gpu=name,memory.total,driver_version', '--format=csv,noheader'], { encoding: 'utf8' }).trim();
  } catch {
    return 'no nvidia-smi';
  }
};
interface BenchResult {
  /** The machine record of the run that measured the rows (another run's with --from-json). */
  machine: MachineRecord;
  gpu: string;
  provider: string;
  pythonSkip: string | null;
  rows: Record<string, unknown>[];
  /** Where the rows came from, when they were merged from several runs. */
  note?: string;
}

// ---- Report (functions of `rows`, read when the report is written)
type Case = ProbeCase & Record<string, unknown>;
const ours = (model: string, provider: string): Record<string, unknown> | undefined => rows.find((r) => r['model'] === model && r['side'] === 'ours' && r['provider'] === provider);
const hf = (model: string, c: ProbeCase, dtype: string): Record<string, unknown> | undefined =>
  rows.find((r) => r['model'] === model && r['side'] === 'transformers' && r['dtype'] === dtype && r['batch'] === c.batch && r['promptTokens'] === c.promptTokens && r['newTokens'] === c.newTokens);
const num = (v: unknown): string => (typeof v === 'number' ? String(v) : '–');
const bench = startBench('gpu', { resultsDir: resolve(OUT) });
const result: BenchResult = FROM_JSON !== undefined ? readEarlier(FROM_JSON) : { machine: bench.machine, gpu: gpuName(), provider: PROVIDER, pythonSkip: pythonSkip ?? null, rows: [] };
const { rows } = result;
const save = (): void => {
  const { machine: measuredOn, ...data } = result;
  bench.write({ title: 'Generation on a GPU', body: report(), data: { ...data, ...(FROM_JSON === undefined ? {} : { renderedFrom: FROM_JSON, measuredOn }) } });
};

for (const plan of FROM_JSON === undefined ? plans : []) {
  const dir = relative(ROOT, plan.dir) || '.';
  // Our side: the provider asked for (one thread: the work is the device's), then the CPU with every core.
  const sides: [string, number][] = [[PROVIDER, 1]];
  if (plan.cpuBaseline) sides.push(['cpu', cpus().length]);
  for (const [provider, threads] of ONLY === 'transformers' ? [] : sides) {
    process.stderr.write(`${plan.model}: ours on ${provider}\n`);
    const out = runCase(process.execPath, [...probeCommand, JSON.stringify({ dir: plan.dir, provider, threads, repeats: plan.repeats, cases: plan.cases })]);
    rows.push({ ...out, model: plan.model, dir, side: 'ours', provider, threads });
    save();
  }
  if (pythonSkip !== undefined) continue;
  for (const c of plan.hf) {
    process.stderr.write(`${plan.model}: transformers on cuda, ${c.dtype}, batch ${c.batch}, ${c.promptTokens} + ${c.newTokens}\n`);
    const payload = { dir: plan.dir, ...c, threads: 1, repeats: plan.hfRepeats, device: 'cuda' };
    rows.push({ ...runCase(PYTHON, [`${ROOT}/bench/python/hf_generate.py`, JSON.stringify(payload)]), model: plan.model, dir, side: 'transformers', provider: 'cuda', ...c, hfRepeats: plan.hfRepeats });
    save();
  }
}

/** An earlier gpu.json; files written before the harness keep the GPU inside their machine and a `date`. */
function readEarlier(path: string): BenchResult {
  const earlier = JSON.parse(readFileSync(path, 'utf8')) as BenchResult & { date?: string; machine: Partial<MachineRecord> & { gpu?: string } };
  return { ...earlier, gpu: earlier.gpu ?? earlier.machine.gpu ?? 'unknown GPU', machine: { ...earlier.machine, startedAt: earlier.machine.startedAt ?? earlier.date ?? 'unknown date' } as MachineRecord };
}

function report(): string[] {
  const lines = [
    `${result.gpu} · our provider: ${result.provider}${FROM_JSON === undefined ? '' : ` · rows measured ${result.machine.startedAt} (${FROM_JSON})`}`,
    '',
    result.pythonSkip ?? 'transformers: PyTorch CUDA on the same GPU, `generate` with T = 1 sampling, top-k and top-p off, no stop token; best of the timed runs after a warm-up; GPU memory = `torch.cuda.max_memory_allocated`.',
    '',
    ...(result.note === undefined ? [] : [`Runs: ${result.note}.`, '']),
    'Ours: the generation graph (prefill + in-graph decode loop, one ONNX Runtime run per turn), float32. Tokens/s = rows × new tokens ÷ the turn',
    '(prefill included); prefill = the same batch with one new token; decode tokens/s = rows × (new − 1) ÷ (turn − prefill).',
    '',
    '| model | provider | batch | prompt + new | tokens/s | prefill tokens/s | decode tokens/s | transformers fp32 tokens/s | transformers fp32 GPU memory | transformers bf16 tokens/s |',
    '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  const turnLines: string[] = [];
  for (const plan of plans) {
    for (const provider of [result.provider, ...(plan.cpuBaseline ? ['cpu'] : [])]) {
      const side = ours(plan.model, provider);
      if (side === undefined) continue;
      if (typeof side['failed'] === 'string') lines.push(`| ${plan.model} | ${provider} | – | – | stopped: ${side['failed']} (the cases it finished follow) | | | | | |`);
      for (const c of (side['cases'] as Case[] | undefined) ?? []) {
        if (c.kind === 'turns') {
          turnLines.push(
            `| ${plan.model} | ${provider} | ${c.batch} | ${c.promptTokens} + ${c.newTokens}, then + ${num(c['appendTokens'])} | ${num(c['cachedSlotsPerRow'])} | ${((c['cacheBytes'] as number) / 1e6).toFixed(0)} MB | ${num(c['reusedMs'])} | ${num(c['reprefilledMs'])} | ${num(c['reuseSpeedup'])}× | ${num(c['sameTokens'])}/${c.batch} |`,
          );
          continue;
        }
        const fp32 = provider === result.provider ? hf(plan.model, c, 'float32') : undefined;
        const bf16 = provider === result.provider ? hf(plan.model, c, 'bfloat16') : undefined;
        lines.push(
          `| ${plan.model} | ${provider} | ${c.batch} | ${c.promptTokens} + ${c.newTokens} | ${num(c['tokensPerS'])} | ${num(c['prefillTokensPerS'])} | ${num(c['decodeTokensPerS'])} | ${num(fp32?.['tokensPerS'] ?? fp32?.['failed'])} | ${typeof fp32?.['maxGpuAllocatedBytes'] === 'number' ? `${(fp32['maxGpuAllocatedBytes'] / 1e9).toFixed(2)} GB` : '–'} | ${num(bf16?.['tokensPerS'] ?? bf16?.['failed'])} |`,
        );
      }
    }
  }
  lines.push(
    '',
    '## A kept cache against a re-prefill',
    '',
    'Turn 1 decodes and keeps each row\'s cache; turn 2 appends tokens and decodes the same number again, fed against the kept cache',
    '(which crosses host → device and back) or with the whole context re-prefilled. Same seeds: the tokens should agree.',
    '',
    '| model | provider | batch | turns | cached slots per row | cache | turn 2, kept cache (ms) | turn 2, re-prefilled (ms) | kept ÷ re-prefilled speed | same tokens |',
    '| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...turnLines,
    '',
    '## Sessions',
    '',
    ...rows.filter((r) => r['side'] === 'ours').map((r) => `- ${String(r['model'])} on ${String(r['provider'])}: load ${num(r['loadMs'])} ms, placement ${JSON.stringify((r['session'] as Record<string, unknown> | undefined)?.['placement'] ?? r['failed'] ?? null)}`),
    '',
  );
  return lines;
}

save();
process.stdout.write(report().join('\n'));
