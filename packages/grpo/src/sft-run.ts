import type { SessionConfig } from '@sqlenv/onnx-graph';
import { type Adapter, type LoraConfig, type LoraWeights, type ModelConfig, type ModelWeights } from '@sqlenv/model';
import { AppError, ErrorCode, Xoshiro128 } from '@sqlenv/shared';
import type { LearnerConfig } from './config.ts';
import { LoraLearner, type LearnerState } from './lora-learner.ts';
import type { TrainedParameters } from './training-graph.ts';
import type { SequenceSample } from './micro-batches.ts';

export interface SftRunOptions {
  modelConfig: ModelConfig;
  weights: ModelWeights;
  lora: LoraConfig;
  /** Learner settings: the optimizer (adamw or sgd, learning rate) and the micro-batch token budget. */
  config: LearnerConfig;
  /** Training sequences in file order. */
  examples: readonly SequenceSample[];
  steps: number;
  /** Sequences per optimizer step. */
  batchSize: number;
  /** Starting adapter (`--adapter-init`); default PEFT's init from `seed` (B = 0: the base model). */
  init?: LoraWeights;
  /** 'lora' (default): train an adapter; 'full': train every base weight (small models from scratch; `lora`/`init` unused). */
  parameters?: TrainedParameters;
  seed?: number;
  /** Visit the lines in a new seeded order every epoch (the shuffle seed is `seed`); default file order. */
  shuffle?: boolean;
  session?: SessionConfig;
  /** Stops the run between steps (SIGINT/SIGTERM in `sqlenv sft`): AppError ABORTED, nothing written. */
  signal?: AbortSignal;
  /** Called after every step (the command prints one JSON line). */
  onStep?: (report: SftStepReport) => void;
  /**
   * Continue a run from a checkpoint: the learner's state after `step` steps (trained tensors and
   * optimizer moments). The next step is `step + 1`, on the lines that step would have had, so a
   * resumed run takes exactly the steps the uninterrupted one would have (same options required).
   */
  resume?: { step: number; state: LearnerState };
  /** Call `onCheckpoint` after every this many steps (and after the last); default never. */
  checkpointEvery?: number;
  /** Receives the learner's state after `step` steps; awaited before the next step. */
  onCheckpoint?: (step: number, state: LearnerState) => Promise<void> | void;
  /** Held-out sequences whose loss is measured every `evalEvery` steps, before the first step and after the last. */
  evalExamples?: readonly SequenceSample[];
  evalEvery?: number;
  onEval?: (report: SftEvalReport) => void;
}

/** The loss on the held-out sequences after `step` steps (0: the starting weights). */
export interface SftEvalReport {
  step: number;
  /** Mean token cross-entropy over every target token of the held-out sequences (no update). */
  loss: number;
  lossTokens: number;
  sequences: number;
  ms: number;
}

/** What one SFT step did. */
export interface SftStepReport {
  /** 1-based step number. */
  step: number;
  /** Mean token cross-entropy of the step's batch before the step moved the adapter. */
  loss: number;
  learningRate: number;
  /** Global L2 norm of the gradient (before any clipping). */
  gradNorm: number;
  /** Target tokens in the batch (the loss's denominator). */
  lossTokens: number;
  /** 0-based indices of the batch's lines among the data lines. */
  lines: number[];
  microBatches: number;
  ms: number;
}

/**
 * The lines of step `step` (0-based): the next `batchSize` lines after the previous step's, wrapping
 * around the end of the file (within a batch too, if it is longer than the file). In file order, or
 * with `shuffleSeed` in a permutation drawn anew for every epoch (pass e visits every line once, in the
 * order of a Fisher–Yates shuffle seeded by (shuffleSeed, e)).
 */
export function sftBatchLines(lineCount: number, batchSize: number, step: number, shuffleSeed?: number): number[] {
  if (lineCount < 1 || batchSize < 1) throw new AppError(ErrorCode.VALIDATION, `an SFT batch needs data lines and a batch size ≥ 1 (got ${lineCount} lines, batch ${batchSize})`);
  const orders = new Map<number, number[]>(); // by epoch: a batch spans one or two (more if it is longer than the file)
  return Array.from({ length: batchSize }, (_, j) => {
    const position = step * batchSize + j;
    const index = position % lineCount;
    if (shuffleSeed === undefined) return index;
    const epoch = Math.floor(position / lineCount);
    let order = orders.get(epoch);
    if (order === undefined) {
      order = epochOrder(lineCount, epoch, shuffleSeed);
      orders.set(epoch, order);
    }
    return order[index] as number;
  });
}

/** Epoch `epoch`'s visiting order: a Fisher–Yates permutation of the lines, seeded by (seed, epoch). */
function epochOrder(lineCount: number, epoch: number, seed: number): number[] {
  const rng = new Xoshiro128(((seed >>> 0) * 0x9e3779b1 + epoch) >>> 0);
  const order = Array.from({ length: lineCount }, (_, i) => i);
  for (let i = lineCount - 1; i > 0; i--) {
    const j = rng.nextUint32() % (i + 1);
    [order[i], order[j]] = [order[j] as number, order[i] as number];
  }
  return order;
}

/** The held-out loss: the sequences in chunks of `batchSize`, each chunk's mean weighted by its target tokens. */
async function heldOutLoss(learner: LoraLearner, examples: readonly SequenceSample[], batchSize: number, step: number): Promise<SftEvalReport> {
  const started = performance.now();
  let sum = 0;
  let tokens = 0;
  for (let i = 0; i < examples.length; i += batchSize) {
    const chunk = examples.slice(i, i + batchSize);
    const chunkTokens = chunk.reduce((n, s) => n + s.lossMask.reduce((a, m) => a + (m > 0 ? 1 : 0), 0), 0);
    if (chunkTokens === 0) continue;
    sum += (await learner.evaluateLoss(chunk)) * chunkTokens;
    tokens += chunkTokens;
  }
  return { step, loss: tokens === 0 ? Number.NaN : sum / tokens, lossTokens: tokens, sequences: examples.length, ms: performance.now() - started };
}

/** A checkpoint's tensors must be the learner's: the same names, each with as many values. */
function checkResumedTensors(expected: ReadonlyMap<string, Float32Array>, given: ReadonlyMap<string, Float32Array>): void {
  for (const [name, data] of expected) {
    const got = given.get(name);
    if (got === undefined) throw new AppError(ErrorCode.VALIDATION, `the checkpoint has no tensor ${name}`);
    if (got.length !== data.length) throw new AppError(ErrorCode.VALIDATION, `the checkpoint's ${name} has ${got.length} values, the model's has ${data.length}`);
  }
  for (const name of given.keys()) if (!expected.has(name)) throw new AppError(ErrorCode.VALIDATION, `the checkpoint has a tensor ${name} the model does not train`);
}

/**
 * Supervised fine-tuning of a LoRA adapter: `steps` optimizer steps, step k on the lines
 * `sftBatchLines(n, batchSize, k)`, each minimising the batch's mean token cross-entropy
 * (Σ over every target token of −log p ÷ the batch's target count) with the learner's optimizer.
 */
export async function runSft(options: SftRunOptions): Promise<{ adapter: Adapter | null; weights: Map<string, Float32Array> | null; reports: SftStepReport[] }> {
  if (!Number.isInteger(options.steps) || options.steps < 1) throw new AppError(ErrorCode.VALIDATION, `steps must be an integer ≥ 1, got ${options.steps}`);
  const full = options.parameters === 'full';
  const learner = await LoraLearner.create(options.modelConfig, options.weights, {
    lora: options.lora,
    config: options.config,
    objective: 'sft',
    parameters: full ? 'full' : 'lora',
    ...(options.init === undefined ? {} : { init: options.init }),
    ...(options.seed === undefined ? {} : { seed: options.seed }),
    ...(options.session === undefined ? {} : { session: options.session }),
  });
  try {
    const start = options.resume?.step ?? 0;
    if (options.resume !== undefined) {
      if (!Number.isInteger(start) || start < 0 || start > options.steps) throw new AppError(ErrorCode.VALIDATION, `a checkpoint after step ${start} cannot resume a run of ${options.steps} steps`);
      checkResumedTensors(learner.weights(), options.resume.state.adapter);
      learner.load(options.resume.state);
    }
    const evaluate = async (step: number): Promise<void> => {
      if (options.evalExamples === undefined || options.evalExamples.length === 0) return;
      options.onEval?.(await heldOutLoss(learner, options.evalExamples, options.batchSize, step));
    };
    const every = (n: number | undefined, k: number): boolean => n !== undefined && n > 0 && (k % n === 0 || k === options.steps);
    if (start === 0) await evaluate(0);
    const reports: SftStepReport[] = [];
    for (let k = start; k < options.steps; k++) {
      if (options.signal?.aborted === true) throw new AppError(ErrorCode.ABORTED, `SFT stopped by a shutdown signal after ${k} of ${options.steps} steps; ${options.checkpointEvery === undefined ? 'nothing was written' : 'the last checkpoint stays'}`);
      const lines = sftBatchLines(options.examples.length, options.batchSize, k, options.shuffle === true ? (options.seed ?? 0) : undefined);
      const started = performance.now();
      const update = await learner.sftUpdate(lines.map((i) => options.examples[i] as SequenceSample));
      const report: SftStepReport = {
        step: k + 1,
        loss: update.loss,
        learningRate: update.learningRate,
        gradNorm: update.gradNorm,
        lossTokens: update.lossTokens,
        lines,
        microBatches: update.microBatches,
        ms: performance.now() - started,
      };
      reports.push(report);
      options.onStep?.(report);
      if (every(options.evalEvery, k + 1)) await evaluate(k + 1);
      if (every(options.checkpointEvery, k + 1)) await options.onCheckpoint?.(k + 1, learner.state());
    }
    return full ? { adapter: null, weights: learner.weights(), reports } : { adapter: learner.adapter(), weights: null, reports };
  } finally {
    await learner.close();
  }
}
