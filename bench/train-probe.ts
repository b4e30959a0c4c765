/**
 * Child process of bench/train.bench.ts: one training configuration in a process of its own, so its
 * peak RSS (VmHWM from /proc) is its own. Builds the training graph for a preset (random weights),
 * creates the session, times one micro-batch's forward (fetching only the log-probs), forward +
 * backward, and an AdamW step on the adapter, and answers with the harness's result line. Started
 * by the bench through the harness's runChild (payload: a ProbeSpec).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSession, saveModel, tensor, type OrtConfigEntries, type TensorData } from '@sqlenv/onnx-graph';
import { buildScoringGraph, IO, initLoraWeights, leftPad, loraTensorSpecs, parseLoraConfig, presetConfig, randomWeights, type DecoderRecompute } from '@sqlenv/model';
import { buildTrainingGraph, LoraOptimizer, parseLearnerConfig, TRAIN_IO } from '@sqlenv/grpo';
import { bestWallMs, childPayload, replyToParent } from './lib/harness.ts';

export interface ProbeSpec {
  preset: string;
  /** Override the preset's depth (per-layer costs are measured on fewer layers). */
  numLayers?: number;
  tokens: number;
  rank: number;
  logprobGradient: 'autodiff' | 'analytic';
  recompute: DecoderRecompute;
  /** ORT session config entries. */
  sessionConfig: OrtConfigEntries;
  /** 'file': write the model + external weights and let ORT map them (JS copies released first). */
  weights: 'file' | 'memory';
  repeats: number;
  intraOpThreads: number;
  /** ORT's memory pattern (SessionConfig.memoryPattern); default on. */
  memoryPattern?: boolean;
}

const payload = childPayload();
if (payload === undefined) throw new Error('bench/train-probe.ts is a child of bench/train.bench.ts: run npm run bench:train');
const spec = payload as ProbeSpec;
const gc = (globalThis as { gc?: () => void }).gc ?? ((): void => undefined);

/** VmHWM / VmRSS of this process in bytes. */
function memory(): { peakBytes: number; rssBytes: number } {
  const status = readFileSync('/proc/self/status', 'utf8');
  const kb = (key: string): number => Number(new RegExp(`${key}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0) * 1024;
  return { peakBytes: kb('VmHWM'), rssBytes: kb('VmRSS') };
}
/** Reset VmHWM to the current RSS (Linux: write 5 to clear_refs), so a phase's peak is its own. */
function resetPeak(): void {
  writeFileSync('/proc/self/clear_refs', '5');
}

const t0 = performance.now();
const config = presetConfig(spec.preset, spec.numLayers === undefined ? {} : { numLayers: spec.numLayers });
const lora = parseLoraConfig({ rank: spec.rank, alpha: 2 * spec.rank });
let weights = randomWeights(config, { seed: 1, initStd: 0.02 });
const learner = parseLearnerConfig({});
let built: ReturnType<typeof buildTrainingGraph> | undefined = buildTrainingGraph(config, weights, { lora, objective: 'policy', loss: learner.loss, vocabChunkSize: learner.vocabChunkSize, logprobGradient: spec.logprobGradient, recompute: spec.recompute });
const graphNodes = built.graph.nodes.length;
// The forward alone: the scoring graph (the same decoder and LoRA inputs, no loss, no backward pass).
// ORT runs every node of a session whatever outputs are fetched, so the training session cannot time it.
let scoring: ReturnType<typeof buildScoringGraph> | undefined = buildScoringGraph(config, weights, { lora, vocabChunkSize: learner.vocabChunkSize });
const session = { mode: 'direct' as const, intraOpThreads: spec.intraOpThreads, sessionConfig: spec.sessionConfig, memoryPattern: spec.memoryPattern ?? true };
let dir: string | undefined;
type Source = Parameters<typeof createSession>[0];
let source: Source | undefined = built.graph.toModel();
let scoringSource: Source | undefined = scoring.graph.toModel();
// The builders reference the float32 weights (initializers): drop them so only ORT's copy remains.
built = undefined;
scoring = undefined;
if (spec.weights === 'file') {
  dir = mkdtempSync(join(tmpdir(), 'sqlenv-train-bench-'));
  // Both graphs declare the same initializers in the same order: the same external files, written twice.
  scoringSource = await saveModel(scoringSource, join(dir, 'score.onnx'));
  source = await saveModel(source, join(dir, 'train.onnx'));
  weights.clear();
  weights = new Map();
}
gc();
const buildMs = performance.now() - t0;

// One row of `tokens` tokens; the second half is the completion (loss tokens).
const T = spec.tokens;
const ids = Array.from({ length: T }, (_, t) => (t * 7919 + 13) % Math.min(config.vocabSize, 151_000));
const batch = leftPad([ids], config.padTokenId);
const perToken = (f: (t: number) => number): TensorData => tensor('float32', [1, T], Float32Array.from({ length: T }, (_, t) => f(t)));
const lossTokens = T - Math.floor(T / 2);
const adapter = initLoraWeights(config, lora, { seed: 2, bStd: 0.01 });
const specs = loraTensorSpecs(config, lora);
const feeds: Record<string, TensorData> = {
  [IO.inputIds]: batch.ids,
  [IO.attentionMask]: batch.mask,
  [IO.temperature]: tensor('float32', [], [1]),
  [TRAIN_IO.tokenWeights]: perToken((t) => (t >= T / 2 ? 1 / lossTokens : 0)),
  [TRAIN_IO.advantages]: perToken(() => 1),
  [TRAIN_IO.behaviourLogprobs]: perToken(() => -12),
  [TRAIN_IO.proxLogprobs]: perToken(() => 0),
  [TRAIN_IO.proxFromCurrent]: tensor('bool', [], [true]),
  ...Object.fromEntries(specs.map((sp) => [sp.name, tensor('float32', sp.shape, adapter.get(sp.name) as Float32Array)])),
};

/** Best of `repeats` wall times. */
const best = (run: () => Promise<void>): Promise<number> => bestWallMs(run, spec.repeats);

const forward = await createSession(scoringSource, session);
scoringSource = undefined;
const forwardMs = await best(async () => {
  await forward.run(Object.fromEntries(Object.entries(feeds).filter(([k]) => forward.inputNames.includes(k))), { outputs: [IO.logprobs] });
});
await forward.close();
gc();

resetPeak();
const t1 = performance.now();
const s = await createSession(source, session);
source = undefined;
gc();
const sessionMs = performance.now() - t1;
const afterSession = memory();
let grads: Map<string, Float32Array> = new Map();
const fullMs = await best(async () => {
  const out = await s.run(feeds);
  grads = new Map(specs.map((sp) => [sp.name, out[TRAIN_IO.gradient(sp.name)]?.data as Float32Array]));
});
const train = memory();
const logprobsOnlyMs = await best(async () => {
  await s.run(feeds, { outputs: [TRAIN_IO.logprobs] });
});
await s.close();
if (dir !== undefined) rmSync(dir, { recursive: true, force: true });

const optimizer = new LoraOptimizer(learner.optimizer);
const params = new Map([...adapter].map(([k, v]) => [k, Float32Array.from(v)]));
const optimizerMs = await best(async () => {
  optimizer.apply(params, grads);
});
const gradNorm = Math.sqrt([...grads.values()].reduce((a, g) => a + g.reduce((b, x) => b + x * x, 0), 0));
replyToParent({
  ...spec,
  numLayers: config.numLayers,
  graphNodes,
  loraParams: specs.reduce((a, sp) => a + sp.shape[0] * sp.shape[1], 0),
  buildMs: Math.round(buildMs),
  sessionMs: Math.round(sessionMs),
  forwardMs: Number(forwardMs.toFixed(1)),
  fullMs: Number(fullMs.toFixed(1)),
  logprobsOnlyMs: Number(logprobsOnlyMs.toFixed(1)),
  optimizerMs: Number(optimizerMs.toFixed(2)),
  gradNormFinite: Number.isFinite(gradNorm) && gradNorm > 0,
  sessionRssBytes: afterSession.rssBytes,
  sessionPeakBytes: afterSession.peakBytes,
  trainPeakBytes: train.peakBytes,
});
