import { freemem } from 'node:os';
import { AppError, describeMemoryLimit, ErrorCode, readMemoryLimit, type MemoryLimit } from '@sqlenv/shared';
import type { ModelConfig } from '../io/config.ts';
import { targetWeight, type LoraTarget } from '../graphs/lora-targets.ts';

/**
 * What a model config implies in bytes, computed from its numbers alone,
 * before anything is allocated: a config.json with three million layers or a
 * LoRA rank of a million must be refused with these numbers, not found out by
 * the process dying of an out-of-memory abort half a minute later.
 *
 * Everything here is a LOWER bound (float32 weights, one copy; activations
 * counted coarsely): a refusal is certain to be right, and what passes may
 * still need more (ONNX Runtime's own buffers, several sessions).
 */

/** Bytes of one float32 value: every tensor is held as float32 in memory, whatever its stored dtype. */
const F32_BYTES = 4;

/** The longest typed array V8 allocates (elements); one tensor larger than this cannot exist in memory at all. */
export const MAX_TENSOR_ELEMENTS = 2 ** 32 - 1;

/** Parameters of a config (weights only; biases and norm scales included). */
export function countParameters(config: ModelConfig): number {
  const { hiddenSize: h, headDim: d, numHeads, numKvHeads, intermediateSize: f, vocabSize: v } = config;
  const attn = h * numHeads * d * 2 + h * numKvHeads * d * 2 + (config.qkvBias ? (numHeads + 2 * numKvHeads) * d : 0) + (config.qkNorm ? 2 * d : 0);
  const layer = attn + 3 * h * f + 2 * h + (config.oBias ? h : 0);
  return v * h * (config.tieWordEmbeddings ? 1 : 2) + config.numLayers * layer + h;
}

/** The largest single tensor of a config, in elements, with the fields that make it. */
export function largestTensor(config: ModelConfig): { elements: number; fields: string } {
  const { hiddenSize: h, headDim: d, numHeads, intermediateSize: f, vocabSize: v } = config;
  const candidates = [
    { elements: v * h, fields: `vocab_size ${v} × hidden_size ${h} (the embedding)` },
    { elements: f * h, fields: `intermediate_size ${f} × hidden_size ${h} (an MLP projection)` },
    { elements: numHeads * d * h, fields: `num_attention_heads ${numHeads} × head_dim ${d} × hidden_size ${h} (q_proj)` },
  ];
  return candidates.reduce((a, b) => (b.elements > a.elements ? b : a));
}

export interface MemoryEstimateOptions {
  /** LoRA rank and targets (adds A [r, in] and B [out, r] per targeted projection of every layer). */
  lora?: { rank: number; targets: readonly LoraTarget[] };
  /** Sequences processed at once (generation batch, training micro-batch rows). */
  batchSize?: number;
  /** Tokens per sequence (prompt + completion). */
  contextTokens?: number;
  /**
   * Copies of the trained parameters beyond the weights themselves: 3 for AdamW
   * (gradient + two moments), 1 for SGD, 0 for inference.
   */
  trainedCopies?: number;
  /** Train every weight (full fine-tuning): the copies apply to all weights, not just the adapter. */
  fullTraining?: boolean;
}

export interface MemoryEstimate {
  weightsBytes: number;
  loraBytes: number;
  /** Optimizer state and gradients of what is trained. */
  trainingBytes: number;
  /** KV cache (inference) or stored activations (training), coarse. */
  activationBytes: number;
  totalBytes: number;
}

/** A lower bound of the memory a config needs for what a command does with it. */
export function estimateModelMemory(config: ModelConfig, options: MemoryEstimateOptions = {}): MemoryEstimate {
  const weightsBytes = countParameters(config) * F32_BYTES;
  const { hiddenSize: h, headDim: d, numHeads, numKvHeads, intermediateSize: f } = config;
  const lora = options.lora;
  // Every layer has the same projections: A [r, in] + B [out, r] per target.
  let loraPerLayer = 0;
  for (const target of lora?.targets ?? []) {
    const w = targetWeight(config, 0, target);
    loraPerLayer += (lora?.rank ?? 0) * (w.inSize + w.outSize);
  }
  const loraBytes = config.numLayers * loraPerLayer * F32_BYTES;
  const copies = options.trainedCopies ?? 0;
  const trainingBytes = copies * (options.fullTraining === true ? weightsBytes : loraBytes);
  const tokens = (options.batchSize ?? 0) * (options.contextTokens ?? 0);
  const kvPerToken = 2 * config.numLayers * numKvHeads * d * F32_BYTES;
  // Training keeps per-layer activations (residual, q/k/v, MLP inner) and the logits per token.
  const trainingPerToken = copies > 0 ? (config.numLayers * (6 * h + 2 * numHeads * d + 3 * f) + 2 * config.vocabSize) * F32_BYTES : 0;
  const activationBytes = tokens * (kvPerToken + trainingPerToken);
  return { weightsBytes, loraBytes, trainingBytes, activationBytes, totalBytes: weightsBytes + loraBytes + trainingBytes + activationBytes };
}

/** "1.2 GB" (decimal units, as memory sizes are usually quoted). */
export function formatBytes(bytes: number): string {
  const units = ['B', 'kB', 'MB', 'GB', 'TB', 'PB', 'EB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit += 1;
  }
  return `${value >= 100 || unit === 0 ? value.toFixed(0) : value.toPrecision(3)} ${units[unit]}`;
}

/**
 * The memory bound a config is checked against: the memory limit of this process (readMemoryLimit:
 * the host's memory, or the container's cgroup limit where smaller), unless the caller names
 * another. Total, not free: free memory moves with every other process, and a refusal must be certain.
 */
export function memoryBoundBytes(override?: number): number {
  return override ?? readMemoryLimit().bytes;
}

/** The bound as a limit with its source: `memoryBytes` (a caller's own bound), else `memoryLimit`, else the one read now. */
function boundOf(options: { memoryBytes?: number | undefined; memoryLimit?: MemoryLimit | undefined }): { bytes: number; label: string } {
  if (options.memoryBytes !== undefined) return { bytes: options.memoryBytes, label: `the ${formatBytes(options.memoryBytes)}` };
  const limit = options.memoryLimit ?? readMemoryLimit();
  return { bytes: limit.bytes, label: `${describeMemoryLimit(limit)}, ${formatBytes(limit.bytes)}` };
}

/** Currently free memory, for messages. */
export function freeMemoryBytes(): number {
  return freemem();
}

/**
 * Refuse a config (and what a command does with it) whose lower-bound
 * estimate exceeds the memory bound (AppError VALIDATION: the command exits 2 before loading), or one
 * of whose tensors cannot exist as a typed array (MODEL). `what` names the source (a config.json
 * path, `--config`).
 */
export function checkModelFits(config: ModelConfig, what: string, options: MemoryEstimateOptions & { memoryBytes?: number; memoryLimit?: MemoryLimit } = {}): MemoryEstimate {
  const largest = largestTensor(config);
  if (largest.elements > MAX_TENSOR_ELEMENTS) {
    throw new AppError(ErrorCode.MODEL, `${what}: ${largest.fields} = ${largest.elements.toExponential(3)} values in one tensor, more than the ${MAX_TENSOR_ELEMENTS} a typed array can hold`, {
      details: { elements: largest.elements },
    });
  }
  const estimate = estimateModelMemory(config, options);
  const bound = boundOf(options);
  if (estimate.totalBytes > bound.bytes) {
    const parts = [
      `weights ${formatBytes(estimate.weightsBytes)} (${countParameters(config).toExponential(3)} parameters: num_hidden_layers ${config.numLayers}, hidden_size ${config.hiddenSize}, intermediate_size ${config.intermediateSize}, vocab_size ${config.vocabSize})`,
      estimate.loraBytes > 0 ? `LoRA ${formatBytes(estimate.loraBytes)} (rank ${options.lora?.rank})` : null,
      estimate.trainingBytes > 0 ? `gradients and optimizer state ${formatBytes(estimate.trainingBytes)}` : null,
      estimate.activationBytes > 0 ? `activations/KV ${formatBytes(estimate.activationBytes)} (${options.batchSize} × ${options.contextTokens} tokens)` : null,
    ].filter((p): p is string => p !== null);
    throw new AppError(ErrorCode.VALIDATION, `${what}: needs at least ${formatBytes(estimate.totalBytes)} of memory, more than ${bound.label}: ${parts.join(', ')}`, {
      details: { ...estimate, boundBytes: bound.bytes },
    });
  }
  return estimate;
}
