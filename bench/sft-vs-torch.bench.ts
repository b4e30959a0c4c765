/**
 * A full-parameter SFT step of models/sqlenv-tiny (the shape of models/sqlenv-base, the checkpoint `npm start` uses) on 16 oracle
 * episodes: `sqlenv sft --full` against the same step in PyTorch + transformers (bench/sft_torch_step.py),
 * on the same cores, side by side in one run. Each side runs in its own child process, the sides
 * alternate round by round so a change in the machine's load hits both. Writes
 * <results dir>/sft-vs-torch.md and .json after every configuration (a run stopped early keeps what it measured).
 *
 *   npm run bench:sft-vs-torch                      # 3 rounds of 4 steps per configuration
 *   npm run bench:sft-vs-torch -- --rounds 5 --steps 6
 *   BENCH_RESULTS_DIR=/tmp/r npm run bench:sft-vs-torch -- --rounds 1 --steps 1   # smallest
 *
 * PyTorch comes from SQLENV_PYTHON (a Python with torch and transformers); without it the PyTorch
 * rows are skipped with a message. Step times exclude each process's first step (graph and
 * allocator warm-up on both sides).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { interleavedRounds, median, numberArg, repoRoot, runSqlenv, startBench } from './lib/harness.ts';

const rounds = numberArg('--rounds', 3);
const steps = numberArg('--steps', 4);
const episodes = 16;
const model = join(repoRoot, 'models', 'sqlenv-tiny');
const python = process.env['SQLENV_PYTHON'];
const cores = availableParallelism();

interface Config {
  label: string;
  side: 'ours' | 'torch';
  threads: number | null;
  batch?: 'padded' | 'lines';
}
/** Ours at the new default (every core) and at the old one (1 thread); PyTorch at its default and at 1 thread, both ways of batching. */
const configs: Config[] = [
  { label: `sqlenv sft --full, --threads ${cores} (default)`, side: 'ours', threads: cores },
  { label: 'sqlenv sft --full, --threads 1', side: 'ours', threads: 1 },
  { label: 'PyTorch, default threads, padded batch', side: 'torch', threads: null, batch: 'padded' },
  { label: 'PyTorch, 1 thread, padded batch', side: 'torch', threads: 1, batch: 'padded' },
  // Last: by far the slowest where the cores are busy (a run cut short still has the rest).
  { label: 'PyTorch, default threads, line by line', side: 'torch', threads: null, batch: 'lines' },
];

const work = mkdtempSync(join(tmpdir(), 'bench-sft-torch-'));
const data = join(work, 'sft.jsonl');
const lr = 1e-4;

/** Step times in ms (the first step of the process dropped) and the thread count the side reports. */
function runOnce(c: Config): { ms: number[]; threads: number } {
  if (c.side === 'ours') {
    const out = runSqlenv(['sft', '--model', model, '--data', data, '--steps', String(steps + 1), '--batch-size', String(episodes), '--full', '--lr', String(lr), '--out', join(work, 'out'), '--force', '--threads', String(c.threads)]);
    const lines = out.trim().split('\n').map((l) => JSON.parse(l) as { step?: number; ms?: number });
    return { ms: lines.filter((l) => l.step !== undefined && l.step > 1).map((l) => l.ms as number), threads: c.threads as number };
  }
  const spec = { model, data, steps: steps + 1, threads: c.threads, batch: c.batch, lr };
  const out = execFileSync(python as string, [join(repoRoot, 'bench', 'sft_torch_step.py'), JSON.stringify(spec)], { encoding: 'utf8', maxBuffer: 64 << 20 });
  const result = JSON.parse(out.trim().split('\n').at(-1) as string) as { ms: number[]; threads: number };
  return { ms: result.ms.slice(1), threads: result.threads };
}

runSqlenv(['sft-data', '--model', model, '--split', 'train', '--episodes', String(episodes), '--seed', '0', '--out', data]);
const dataLines = readFileSync(data, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { input_ids: number[] });
const tokens = dataLines.reduce((n, l) => n + l.input_ids.length, 0);
const active = configs.filter((c) => c.side === 'ours' || python !== undefined);
if (python === undefined) console.log('SQLENV_PYTHON is not set: the PyTorch rows are skipped (set it to a Python with torch and transformers).');
const bench = startBench('sft-vs-torch');
const samples = new Map<string, { ms: number[]; threads: number }>();
await interleavedRounds(active, rounds, runOnce, ({ variant: c, round, result: got }) => {
  const s = samples.get(c.label) ?? { ms: [], threads: got.threads };
  s.ms.push(...got.ms);
  samples.set(c.label, s);
  console.log(`round ${round + 1}/${rounds} ${c.label}: ${got.ms.map((x) => x.toFixed(0)).join(', ')} ms`);
  const { markdownPath } = writeResults(round + 1);
  if (round === rounds - 1 && c === active.at(-1)) console.log(readFileSync(markdownPath, 'utf8'));
});
rmSync(work, { recursive: true, force: true });

function writeResults(roundsDone: number): { markdownPath: string } {
  const rows = active.filter((c) => samples.has(c.label)).map((c) => {
    const s = samples.get(c.label) as { ms: number[]; threads: number };
    return { label: c.label, side: c.side, threads: s.threads, batch: c.batch ?? null, medianMs: Math.round(median(s.ms)), minMs: Math.round(Math.min(...s.ms)), steps: s.ms.length };
  });
  const oursDefault = rows[0] as (typeof rows)[number];
  const torchRows = rows.filter((r) => r.side === 'torch' && r.label.includes('default threads'));
  const torchBest = torchRows.length === 0 ? undefined : torchRows.reduce((a, b) => (a.medianMs <= b.medianMs ? a : b));
  const speedup = torchBest === undefined ? null : torchBest.medianMs / oursDefault.medianMs;
  const data = { episodes, tokens, rounds, roundsStarted: roundsDone, stepsPerRound: steps, rows, speedupVsTorchDefault: speedup === null ? null : Math.round(speedup * 100) / 100 };
  const md = [
    `One full-parameter SFT step (AdamW, gradient clipped to norm 1) of models/sqlenv-tiny on ${episodes} oracle episodes of the train split (${tokens} tokens), float32 on the CPU. ` +
      `${roundsDone} of ${rounds} rounds, the sides alternating; ${steps} timed steps per process after one warm-up step. PyTorch + transformers via bench/sft_torch_step.py, at PyTorch's default thread count (one per core) and at 1.`,
    '',
    '| configuration | threads | median step ms | fastest step ms | steps timed |',
    '|---|---:|---:|---:|---:|',
    ...rows.map((r) => `| ${r.label} | ${r.threads} | ${r.medianMs} | ${r.minMs} | ${r.steps} |`),
    '',
    speedup === null ? 'PyTorch was not measured (SQLENV_PYTHON unset).' : `sqlenv at its default threads vs PyTorch's faster default-thread configuration (${torchBest?.label}): **${speedup.toFixed(2)}×** PyTorch's speed (> 1 is faster).`,
    '',
  ];
  return bench.write({ title: 'SFT step: sqlenv vs PyTorch', body: md, data });
}
