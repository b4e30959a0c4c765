/**
 * bench:graph: cost of the emitted backward pass and of the worker-thread runtime.
 *
 *   npm run bench:graph
 *
 * Measures, on CPU (onnxruntime-node, direct mode, fixed thread counts):
 * - a pre-norm transformer block (RMSNorm, 4-head causal attention, SwiGLU MLP)
 *   at a few sizes: forward-only time vs forward+backward time (gradients w.r.t.
 *   every block weight, emitted by `gradients()`), and the ratio. Reverse mode
 *   should cost a small constant factor of the forward (about 2-3x), not 10x;
 * - per-run overhead of the worker-thread runtime vs a direct `session.run`,
 *   for a tiny graph (pure overhead) and for 1 MiB in/out (copy cost);
 * - peak and settled RSS of a worker-mode session over a 256 MiB weight, created from
 *   a built model (copied to the worker), SharedArrayBuffer-backed weights, or a saved
 *   model file (one child process each).
 * Writes <results dir>/graph.md and graph.json.
 *
 *   BENCH_BLOCK_RUNS=3 BENCH_OVERHEAD_RUNS=20 BENCH_RESULTS_DIR=/tmp/r npm run bench:graph   (smallest)
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { attention, causalMask, gradients, Graph, linear, rmsNorm, silu, tensor, type GraphSession, type TensorData, type Tensor, createSession, saveModel } from '@sqlenv/onnx-graph';
import { benchSettings, childPayload, positiveInt, replyToParent, runChild, startBench } from './lib/harness.ts';

// ---- worker-session memory probe (runs in a child process: its RSS is its own) ----------------
const MEMORY_SOURCES = ['built model (copied)', 'SharedArrayBuffer weights', 'model file'] as const;
const memoryWeightSide = 8192; // float32 [8192, 8192] = 256 MiB

function memoryProbeModel(data: Float32Array): ReturnType<Graph['toModel']> {
  const g = new Graph();
  const w = g.initializer('w', tensor('float32', [memoryWeightSide, memoryWeightSide], data), { external: true });
  g.output('y', g.matMul(g.input('x', 'float32', [1, memoryWeightSide]), w));
  return g.toModel({ externalData: 'all' });
}

const memoryProbe = childPayload() as { source: string; dir: string } | undefined;
if (memoryProbe !== undefined) {
  const { source, dir } = memoryProbe;
  const n = memoryWeightSide ** 2;
  if (source === 'write') {
    await saveModel(memoryProbeModel(new Float32Array(n).fill(0.001)), join(dir, 'model.onnx'));
  } else {
    // Pre-packing off: ORT keeps exactly one copy, so the differences are the JS-side copies.
    const config = { mode: 'worker', sessionConfig: { 'session.disable_prepacking': '1' } } as const;
    const session =
      source === 'model file'
        ? await createSession({ path: join(dir, 'model.onnx') }, config)
        : await createSession(memoryProbeModel(new Float32Array(source === 'SharedArrayBuffer weights' ? new SharedArrayBuffer(n * 4) : new ArrayBuffer(n * 4)).fill(0.001)), config);
    for (let i = 0; i < 3; i++) await session.run({ x: tensor('float32', [1, memoryWeightSide], new Float32Array(memoryWeightSide).fill(1)) });
    const settledRssBytes = process.memoryUsage().rss;
    await session.close();
    replyToParent({ source, peakRssBytes: process.resourceUsage().maxRSS * 1024, settledRssBytes });
  }
  replyToParent({ source });
  process.exit(0);
}
/** Block sizes: batch, sequence length, model width (4 heads, MLP 4x... as SwiGLU 8/3x rounded). */
const sizes = [
  { batch: 2, seqLen: 32, dModel: 64 },
  { batch: 4, seqLen: 64, dModel: 128 },
  { batch: 4, seqLen: 128, dModel: 256 },
] as const;
const heads = 4;
/** ORT threads per op for the block benchmark (recorded in the results). */
const intraOpThreads = 1;
const warmupRuns = 3;
const settings = benchSettings(
  z.object({
    /** Measured runs per block configuration; the median is reported. */
    BENCH_BLOCK_RUNS: positiveInt(30),
    BENCH_OVERHEAD_RUNS: positiveInt(400),
  }),
);
const blockRuns = settings.BENCH_BLOCK_RUNS;
const overheadRuns = settings.BENCH_OVERHEAD_RUNS;
const bench = startBench('graph');

function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (((t ^ (t >>> 14)) >>> 0) / 4294967296 - 0.5) * 0.2;
  };
}

/** One decoder block; returns the loss and the weights (so the caller can ask for their gradients). */
function buildBlock(g: Graph, size: (typeof sizes)[number]): { loss: Tensor; weights: Tensor[] } {
  const { seqLen: T, dModel: D } = size;
  const hidden = Math.round((8 * D) / 3 / 8) * 8;
  const next = seeded(D);
  const weight = (name: string, dims: number[]): Tensor => g.initializer(name, tensor('float32', dims, Float32Array.from({ length: dims.reduce((a, b) => a * b, 1) }, next)));
  const x = g.input('x', 'float32', ['B', T, D]);
  const w = {
    norm1: g.initializer('norm1', tensor('float32', [D], new Float32Array(D).fill(1))),
    q: weight('q', [D, D]),
    k: weight('k', [D, D]),
    v: weight('v', [D, D]),
    o: weight('o', [D, D]),
    norm2: g.initializer('norm2', tensor('float32', [D], new Float32Array(D).fill(1))),
    gate: weight('gate', [hidden, D]),
    up: weight('up', [hidden, D]),
    down: weight('down', [D, hidden]),
  };
  const split = (t: Tensor): Tensor => g.transpose(g.reshape(t, ['B', T, heads, D / heads]), [0, 2, 1, 3]); // (B, H, T, Dh)
  const h = rmsNorm(x, w.norm1); // (B, T, D)
  const ctx = attention(split(linear(h, w.q)), split(linear(h, w.k)), split(linear(h, w.v)), causalMask(g, T)); // (B, H, T, Dh)
  const x1 = g.add(x, linear(g.reshape(g.transpose(ctx, [0, 2, 1, 3]), ['B', T, D]), w.o)); // (B, T, D)
  const h2 = rmsNorm(x1, w.norm2);
  const y = g.add(x1, linear(g.mul(silu(linear(h2, w.gate)), linear(h2, w.up)), w.down)); // (B, T, D)
  return { loss: g.reduceMean(g.mul(y, y)), weights: Object.values(w) };
}

interface Timing {
  /** Median wall-clock time per run. */
  wallMs: number;
  /**
   * Median CPU time of this process per run (user + system). With one intra-op thread the
   * kernels run on the calling thread, so this is the compute cost even when other
   * processes preempt us on a shared machine (wall time then also counts their slices).
   */
  cpuMs: number;
}

/** Median run time of each session, runs alternating between them after a warm-up. */
async function interleavedMedians(sessions: readonly GraphSession[], feeds: Record<string, TensorData>, runs: number): Promise<Timing[]> {
  for (const s of sessions) for (let i = 0; i < warmupRuns; i++) await s.run(feeds);
  const wall = sessions.map((): number[] => []);
  const cpu = sessions.map((): number[] => []);
  for (let i = 0; i < runs; i++) {
    for (const [k, s] of sessions.entries()) {
      const cpuStart = process.cpuUsage();
      const start = performance.now();
      await s.run(feeds);
      wall[k]?.push(performance.now() - start);
      const used = process.cpuUsage(cpuStart);
      cpu[k]?.push((used.user + used.system) / 1000);
    }
  }
  const median = (t: number[]): number => [...t].sort((a, b) => a - b)[Math.floor(t.length / 2)] ?? NaN;
  return sessions.map((_, k) => ({ wallMs: median(wall[k] ?? []), cpuMs: median(cpu[k] ?? []) }));
}

interface BlockResult {
  batch: number;
  seqLen: number;
  dModel: number;
  forwardNodes: number;
  backwardNodes: number;
  forward: Timing;
  forwardBackward: Timing;
  /** forward+backward ÷ forward, CPU time. */
  ratio: number;
  /** The same ratio in wall-clock time. */
  wallRatio: number;
  /** backward alone ÷ forward, CPU time: (fwd+bwd − fwd) ÷ fwd. */
  backwardRatio: number;
}

async function benchBlock(size: (typeof sizes)[number]): Promise<BlockResult> {
  const fwd = new Graph();
  fwd.output('loss', buildBlock(fwd, size).loss);
  const both = new Graph();
  const { loss, weights } = buildBlock(both, size);
  const forwardNodes = both.nodes.length;
  both.output('loss', loss);
  gradients(loss, weights).forEach((d, i) => both.output(`grad_${i}`, d));
  const feeds = { x: tensor('float32', [size.batch, size.seqLen, size.dModel], Float32Array.from({ length: size.batch * size.seqLen * size.dModel }, seeded(9))) };
  const config = { mode: 'direct', intraOpThreads, interOpThreads: 1 } as const;
  const sf = await createSession(fwd.toModel(), config);
  const sb = await createSession(both.toModel(), config);
  // Interleaved, so load from other processes on the machine hits both graphs alike.
  const [forward, forwardBackward] = (await interleavedMedians([sf, sb], feeds, blockRuns)) as [Timing, Timing];
  await sf.close();
  await sb.close();
  return {
    ...size,
    forwardNodes,
    backwardNodes: both.nodes.length - forwardNodes,
    forward,
    forwardBackward,
    ratio: forwardBackward.cpuMs / forward.cpuMs,
    wallRatio: forwardBackward.wallMs / forward.wallMs,
    backwardRatio: (forwardBackward.cpuMs - forward.cpuMs) / forward.cpuMs,
  };
}

interface OverheadResult {
  payload: string;
  directMs: number;
  workerMs: number;
  overheadMs: number;
}

async function benchOverhead(label: string, elements: number): Promise<OverheadResult> {
  const g = new Graph();
  g.output('y', g.add(g.input('x', 'float32', [elements]), 1));
  const model = g.toModel();
  const feeds = { x: tensor('float32', [elements], new Float32Array(elements).fill(1)) };
  const direct = await createSession(model, { mode: 'direct' });
  const worker = await createSession(model, { mode: 'worker' });
  const [direct_, worker_] = (await interleavedMedians([direct, worker], feeds, overheadRuns)) as [Timing, Timing];
  const [directMs, workerMs] = [direct_.wallMs, worker_.wallMs];
  await direct.close();
  await worker.close();
  return { payload: label, directMs, workerMs, overheadMs: workerMs - directMs };
}

const started = Date.now();
const blocks: BlockResult[] = [];
for (const size of sizes) {
  const r = await benchBlock(size);
  blocks.push(r);
  console.log(`block B=${r.batch} T=${r.seqLen} D=${r.dModel}: forward ${r.forward.cpuMs.toFixed(2)} ms CPU, forward+backward ${r.forwardBackward.cpuMs.toFixed(2)} ms CPU (x${r.ratio.toFixed(2)}; wall x${r.wallRatio.toFixed(2)})`);
}
const overhead = [await benchOverhead('16 floats', 16), await benchOverhead('1 MiB in + 1 MiB out', 2 ** 18)];
for (const o of overhead) console.log(`run overhead (${o.payload}): direct ${o.directMs.toFixed(3)} ms, worker ${o.workerMs.toFixed(3)} ms`);

const memoryDir = await mkdtemp(join(tmpdir(), 'bench-graph-memory-'));
const self = fileURLToPath(import.meta.url);
const probe = (source: string): unknown => runChild(self, { source, dir: memoryDir });
probe('write');
const memory = MEMORY_SOURCES.map((source) => probe(source) as { source: string; peakRssBytes: number; settledRssBytes: number });
await rm(memoryDir, { recursive: true, force: true });
for (const m of memory) console.log(`worker session memory (${m.source}): peak ${(m.peakRssBytes / 2 ** 20).toFixed(0)} MiB, settled ${(m.settledRssBytes / 2 ** 20).toFixed(0)} MiB`);

const fmt = (v: number, digits = 2): string => v.toFixed(digits);
const md = [
  `onnxruntime-node CPU provider. Total bench time ${fmt((Date.now() - started) / 1000, 1)} s.`,
  '',
  `## Transformer block: forward vs forward+backward`,
  '',
  `Pre-norm block: RMSNorm, ${heads}-head causal attention, SwiGLU MLP; loss = mean(y²). Backward = gradients w.r.t. all 9 block weights, emitted by \`gradients()\`. Direct mode, intraOpThreads ${intraOpThreads}, runs of the two graphs interleaved, median of ${blockRuns} after ${warmupRuns} warm-up. CPU ms = this process's CPU time per run (the compute cost; with one intra-op thread the kernels run on the calling thread); wall ms also counts time other processes held the cores.`,
  '',
  '| B | T | D | forward nodes | backward nodes | forward CPU ms | fwd+bwd CPU ms | fwd+bwd ÷ fwd (CPU) | bwd ÷ fwd (CPU) | forward wall ms | fwd+bwd wall ms | fwd+bwd ÷ fwd (wall) |',
  '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ...blocks.map(
    (b) =>
      `| ${b.batch} | ${b.seqLen} | ${b.dModel} | ${b.forwardNodes} | ${b.backwardNodes} | ${fmt(b.forward.cpuMs)} | ${fmt(b.forwardBackward.cpuMs)} | ${fmt(b.ratio)} | ${fmt(b.backwardRatio)} | ${fmt(b.forward.wallMs)} | ${fmt(b.forwardBackward.wallMs)} | ${fmt(b.wallRatio)} |`,
  ),
  '',
  'Reverse mode needs about two forward-sized products per linear layer (dX and dW), so backward ≈ 2× forward and forward+backward ≈ 3× forward is the expected cost.',
  '',
  '## Worker-thread runtime: per-run overhead',
  '',
  `\`y = x + 1\`; median of ${overheadRuns} sequential runs. Worker = postMessage (feeds copied), run on the worker, outputs transferred back.`,
  '',
  '| payload | direct ms | worker ms | overhead ms |',
  '| --- | --- | --- | --- |',
  ...overhead.map((o) => `| ${o.payload} | ${fmt(o.directMs, 3)} | ${fmt(o.workerMs, 3)} | ${fmt(o.overheadMs, 3)} |`),
  '',
  '## Worker-mode session memory',
  '',
  'One float32 weight of 256 MiB as external data, `MatMul` with a [1, 8192] input, worker mode, `session.disable_prepacking` (ORT keeps one copy); one child process per source, peak = the process\'s max RSS, settled = RSS after three runs.',
  '',
  '| source | peak RSS MiB | settled RSS MiB |',
  '| --- | --- | --- |',
  ...memory.map((m) => `| ${m.source} | ${fmt(m.peakRssBytes / 2 ** 20, 0)} | ${fmt(m.settledRssBytes / 2 ** 20, 0)} |`),
  '',
  'Built model: the caller\'s weights, the copy posted to the worker and ORT\'s own. SharedArrayBuffer weights: the worker reads the caller\'s memory (no posted copy). Model file (`saveModel` + `createSession({ path })`): ORT reads the file in the worker, the creating process never holds the weights.',
  '',
];
bench.write({ title: 'bench:graph', body: md, data: { heads, intraOpThreads, blockRuns, overheadRuns, blocks, overhead, memory } });
