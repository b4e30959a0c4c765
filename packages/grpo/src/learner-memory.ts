import { estimateModelMemory, formatBytes, type DecoderRecompute, type LoraTarget, type ModelConfig } from '@sqlenv/model';
import { AppError, describeMemoryLimit, ErrorCode, type MemoryLimit } from '@sqlenv/shared';
import { keptActivationBytes, RECOMPUTE_ABOVE_BYTES } from './training-graph.ts';

/**
 * The learner's micro-batch under the process's memory limit (the container's where it is smaller
 * than the host's). Fixed: the float32 weights and the adapter with its gradient and AdamW's two
 * moments. Per micro-batch: the activations the backward pass keeps (keptActivationBytes; with
 * whole layers recomputed, each layer's input plus one layer's activations). The activations get at
 * most half of what the limit leaves after the fixed part; the other half is for ONNX Runtime's own
 * buffers and, in `sqlenv train`, the inference engine beside the learner. All lower bounds, like
 * the fit checks of @sqlenv/model: a refusal is certain, a pass is not a promise.
 */

/** The fewest tokens a micro-batch is shrunk to; below it a learner is refused (one short episode). */
export const MIN_MICRO_BATCH_TOKENS = 256;

export interface LearnerMemoryPlan {
  microBatchTokens: number;
  /** What the backward pass recomputes (the setting's, or 'layer' chosen here when 'auto' must save memory). */
  recompute: DecoderRecompute;
  fixedBytes: number;
  activationBytes: number;
  /** What the activations may take: half of the limit after the fixed part. */
  budgetBytes: number;
  /** The micro-batch is smaller than asked (a default shrunk to fit). */
  reduced: boolean;
}

export interface LearnerMemoryInput {
  config: ModelConfig;
  lora: { rank: number; targets: readonly LoraTarget[] };
  microBatchTokens: number;
  recompute: DecoderRecompute | 'auto';
  /** The micro-batch was set by the run (--learner): it is checked, never shrunk. */
  explicit: boolean;
  limit: MemoryLimit;
}

/** Activation bytes one micro-batch keeps with this recompute setting. */
export function microBatchActivationBytes(config: ModelConfig, tokens: number, recompute: DecoderRecompute): number {
  const all = keptActivationBytes(config, tokens);
  if (recompute !== 'layer') return all;
  return all / config.numLayers + tokens * config.numLayers * config.hiddenSize * 4;
}

/** The micro-batch and recompute setting a learner runs with under `limit`; throws VALIDATION with the numbers when none fits. */
export function planLearnerMemory(input: LearnerMemoryInput): LearnerMemoryPlan {
  const { config, limit } = input;
  const estimate = estimateModelMemory(config, { lora: input.lora, trainedCopies: 3 });
  const fixedBytes = estimate.weightsBytes + estimate.loraBytes + estimate.trainingBytes;
  const budgetBytes = Math.max(0, (limit.bytes - fixedBytes) / 2);
  const settingFor = (tokens: number): DecoderRecompute => {
    if (input.recompute !== 'auto') return input.recompute;
    const kept = keptActivationBytes(config, tokens);
    return kept > RECOMPUTE_ABOVE_BYTES || kept > budgetBytes ? 'layer' : 'none';
  };
  const fits = (tokens: number): boolean => microBatchActivationBytes(config, tokens, settingFor(tokens)) <= budgetBytes;
  let tokens = input.microBatchTokens;
  if (!input.explicit) while (!fits(tokens) && tokens / 2 >= MIN_MICRO_BATCH_TOKENS) tokens = Math.floor(tokens / 2);
  const recompute = settingFor(tokens);
  const activationBytes = microBatchActivationBytes(config, tokens, recompute);
  if (activationBytes > budgetBytes) {
    throw new AppError(
      ErrorCode.VALIDATION,
      `the learner does not fit in ${describeMemoryLimit(limit)}, ${formatBytes(limit.bytes)}: weights, adapter, gradient and AdamW moments ${formatBytes(fixedBytes)}, and a micro-batch of ${tokens} tokens keeps ${formatBytes(activationBytes)} of activations (recompute ${recompute}) where half of what is left, ${formatBytes(budgetBytes)}, is available${input.explicit ? '; lower the learner\'s microBatchTokens' : ''}`,
      { details: { fixedBytes, activationBytes, budgetBytes, limitBytes: limit.bytes } },
    );
  }
  return { microBatchTokens: tokens, recompute, fixedBytes, activationBytes, budgetBytes, reduced: tokens < input.microBatchTokens };
}
