/**
 * Training cost on CPU: one micro-batch's forward, forward + backward and optimizer step, and the peak
 * RSS of each configuration of the memory plan, each in a child process (bench/train-probe.ts) so
 * peaks do not mix. Writes <results dir>/train.md and .json; each mode below updates its own section
 * (the others are kept from the train.json already there).
 *
 *   npm run bench:train                          # tiny-qwen3, every head × recompute variant
 *   npm run bench:train -- --qwen3-0.6b --layers 4  # Qwen3-0.6B shapes cut to 4 layers: every variant and session option
 *   npm run bench:train -- --qwen3-0.6b          # Qwen3-0.6B shapes, 28 layers: before and after the memory plan
 *   npm run bench:train -- --render              # rewrite train.md from train.json
 *   BENCH_RESULTS_DIR=/tmp/r npm run bench:train -- --repeats 1   # smallest
 *
 * Qwen3-0.6B shapes allocate 2.4 GB of float32 weights plus activations: run one at a time.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadAverage1mNow, numberArg, resultsDir, runChild, startBench, type MachineRecord } from './lib/harness.ts';
import type { ProbeSpec } from './train-probe.ts';

type Row = ProbeSpec & Record<string, unknown> & { label: string; loadAverage: number };
interface Section {
  date: string;
  loadAverage1mStart: number;
  rows: Row[];
  /** A remark kept with the measurements (rendered under the table). */
  note?: string;
}
type SectionName = 'tiny' | 'qwenReduced' | 'qwenFull';
type Results = Partial<Record<SectionName, Section>>;

const args = process.argv.slice(2);
const qwen = args.includes('--qwen3-0.6b');
const layersArg = args.indexOf('--layers');
const layers = layersArg >= 0 ? Number(args[layersArg + 1]) : undefined;
const NO_PREPACK = { 'session.disable_prepacking': '1' } as const;

/** The variants: [label, overrides]. "before" is the graph as first written (autodiff head, nothing recomputed). */
const VARIANTS: [string, Partial<ProbeSpec>][] = [
  ['before: autodiff head, keep all', { logprobGradient: 'autodiff', recompute: 'none' }],
  ['analytic head, keep all', { logprobGradient: 'analytic', recompute: 'none' }],
  ['analytic head, recompute attention', { logprobGradient: 'analytic', recompute: 'attention' }],
  ['after: analytic head, recompute layers', { logprobGradient: 'analytic', recompute: 'layer' }],
];
const SESSION_VARIANTS: [string, Partial<ProbeSpec>][] = [
  ['before, with pre-packing', { logprobGradient: 'autodiff', recompute: 'none', sessionConfig: {} }],
  ['before, ConstantFolding off', { logprobGradient: 'autodiff', recompute: 'none', sessionConfig: { ...NO_PREPACK, 'optimization.disable_specified_optimizers': 'ConstantFolding' } }],
  ['after, with pre-packing', { logprobGradient: 'analytic', recompute: 'layer', sessionConfig: {} }],
  ['after, weights from memory', { logprobGradient: 'analytic', recompute: 'layer', weights: 'memory' }],
];

let section: SectionName;
let base: ProbeSpec;
let plan: [string, Partial<ProbeSpec>][];
if (!qwen) {
  section = 'tiny';
  base = { preset: 'tiny-qwen3', tokens: 256, rank: 16, logprobGradient: 'analytic', recompute: 'layer', sessionConfig: {}, weights: 'memory', repeats: 5, intraOpThreads: 1, memoryPattern: false };
  plan = VARIANTS;
} else {
  section = layers === undefined ? 'qwenFull' : 'qwenReduced';
  base = { preset: 'qwen3-0.6b', tokens: 1024, rank: 16, logprobGradient: 'analytic', recompute: 'layer', sessionConfig: NO_PREPACK, weights: 'file', repeats: 2, intraOpThreads: 2, memoryPattern: false, ...(layers === undefined ? {} : { numLayers: layers }) };
  plan = layers === undefined ? [VARIANTS[0], VARIANTS[3]] as [string, Partial<ProbeSpec>][] : [...VARIANTS, ...SESSION_VARIANTS];
}

base = { ...base, repeats: numberArg('--repeats', base.repeats) };

// --render: rewrite train.md from train.json without measuring.
const render = args.includes('--render');
const probe = fileURLToPath(new URL('./train-probe.ts', import.meta.url));
const bench = startBench('train');
const rows: Row[] = [];
for (const [label, overrides] of render ? [] : plan) {
  const loadAverage = loadAverage1mNow();
  const row = { label, loadAverage, ...(runChild(probe, { ...base, ...overrides }, { execArgv: ['--expose-gc'] }) as Record<string, unknown>) } as Row;
  rows.push(row);
  process.stderr.write(`${label}: ${JSON.stringify(row)}\n`);
}

// The other modes' sections, as the train.json already there holds them (with the machine each ran on).
const jsonPath = join(resultsDir(), 'train.json');
const earlier = (existsSync(jsonPath) ? JSON.parse(readFileSync(jsonPath, 'utf8')) : {}) as Results & { machine?: MachineRecord; name?: string };
const { machine: _earlierMachine, name: _name, ...results } = earlier;
if (!render) results[section] = { date: bench.machine.startedAt, loadAverage1mStart: bench.machine.loadAverage1mStart, rows };

const gb = (v: unknown): string => `${(Number(v) / 1e9).toFixed(2)} GB`;
const sec = (v: unknown): string => (Number(v) >= 1000 ? `${(Number(v) / 1000).toFixed(1)} s` : `${Number(v).toFixed(1)} ms`);
function table(s: Section | undefined, withPeaks: boolean): string {
  if (s === undefined) return 'Not measured yet.';
  const head = ['configuration', 'forward', 'forward + backward', 'backward ÷ forward', 'fetch only log-probs', 'AdamW step', ...(withPeaks ? ['peak RSS (session ready)', '**peak RSS (training)**'] : []), 'load avg'];
  const lines = s.rows.map((r) => {
    const fwd = Number(r['forwardMs']);
    const full = Number(r['fullMs']);
    const cells = [r.label, sec(fwd), sec(full), `${((full - fwd) / fwd).toFixed(1)}`, sec(r['logprobsOnlyMs']), `${Number(r['optimizerMs']).toFixed(1)} ms`];
    if (withPeaks) cells.push(gb(r['sessionPeakBytes']), `**${gb(r['trainPeakBytes'])}**`);
    cells.push(String(r.loadAverage));
    return `| ${cells.join(' | ')} |`;
  });
  const table = [`${s.date} · 1-min load average ${s.loadAverage1mStart ?? (s as { loadAverageAtStart?: number }).loadAverageAtStart} at start`, '', `| ${head.join(' | ')} |`, `| ${head.map((_, i) => (i === 0 ? '---' : '---:')).join(' | ')} |`, ...lines];
  return [...table, ...(s.note === undefined ? [] : ['', s.note])].join('\n');
}
const reduced = results.qwenReduced?.rows[0];
const md = [
  'Each section ran on its own date (under its heading); the machine line above is the latest run\'s.',
  '',
  'One micro-batch of one sequence, the second half of it loss tokens, GRPO loss (token normalisation, no KL), LoRA rank 16',
  '(α 32) on all seven projections of every layer, random weights, float32. "forward": the scoring graph alone (same',
  'decoder and adapter inputs; ORT runs every node of a session whatever outputs are fetched, see "fetch only log-probs"',
  'on the training session); "forward + backward": one `run()` of the training graph (loss + every LoRA gradient);',
  '"AdamW step": `LoraOptimizer.apply` on all LoRA tensors. Best of the repeats (shared cores). Peak RSS is the child',
  "process's VmHWM, reset (`/proc/self/clear_refs`) after the forward-only phase: session creation plus one training run.",
  '',
  '## tiny-qwen3 (2 layers, hidden 64, vocab 272), 256 tokens, 1 intra-op thread',
  '',
  table(results.tiny, false),
  '',
  '## Qwen3-0.6B shapes, 1,024 tokens, 28 layers (target: peak ≤ 8 GB)',
  '',
  'Weights written as an ONNX file with external data and mapped by ORT (the JavaScript float32 copies released first),',
  '`session.disable_prepacking`, ORT memory pattern off (as `LoraLearner` creates it), 2 intra-op threads, best of 2 runs',
  '(rows measured otherwise say so in the note under the table).',
  '',
  table(results.qwenFull, true),
  '',
  `## Qwen3-0.6B shapes cut to ${String(reduced?.numLayers ?? 'N')} layers: every variant`,
  '',
  'Same shapes (hidden 1024, vocab 151,936, heads 16/8 × 128, SwiGLU 3072) with fewer layers, to compare the variants',
  'and session options without a 28-layer process for each. Defaults as above unless the label says otherwise.',
  '',
  table(results.qwenReduced, true),
  '',
];
bench.write({ title: 'Training benchmark (CPU)', body: md, data: results });
process.stdout.write(md.join('\n'));
