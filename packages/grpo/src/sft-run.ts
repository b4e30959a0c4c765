import type { SessionConfig } from '@sqlenv/onnx-graph';
import { Rng, type Adapter, type LoraConfig, type LoraWeights, type ModelConfig, type ModelWeights } from '@sqlenv/model';
import { AppError, ErrorCode } from '@sqlenv/shared';
import type { LearnerConfig } from './config.ts';
import { LoraLearner } from './lora-learner.ts';
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
  const rng = new Rng(((seed >>> 0) * 0x9e3779b1 + epoch) >>> 0);
  const order = Array.from({ length: lineCount }, (_, i) => i);
  for (let i = lineCount - 1; i > 0; i--) {
    const j = rng.nextUint32() % (i + 1);
    [order[i], order[j]] = [order[j] as number, order[i] as number];
  }
  return order;
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
    const reports: SftStepReport[] = [];
    for (let k = 0; k < options.steps; k++) {
      if (options.signal?.aborted === true) throw new AppError(ErrorCode.ABORTED, `SFT stopped by a shutdown signal after ${k} of ${options.steps} steps; nothing was written`);
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
    }
    return full ? { adapter: null, weights: learner.weights(), reports } : { adapter: learner.adapter(), weights: null, reports };
  } finally {
    await learner.close();
  }
}
