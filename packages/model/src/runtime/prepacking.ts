import type { ModelWeights } from '../io/weights.ts';

/**
 * Whether ONNX Runtime pre-packs the generation graph's weights (`session.disable_prepacking`).
 *
 * Pre-packing lays each linear weight out for ORT's GEMM once per consuming node, and the
 * generation graph has several (the prefill loops and the decode loop), so a pre-packed session
 * holds extra copies of every linear weight. For small models that memory is nothing and the packed
 * GEMMs are as fast or faster; for big ones it is gigabytes. Measured (bench/results/prepacking.md,
 * one thread, the shared 2-core development machine): sqlenv-tiny (8 MiB of weights) the same speed
 * and memory within the noise; SmolLM2-135M shapes (513 MiB) up to 15 % faster pre-packed for
 * about 510 MiB more resident (a second copy of the weights); Qwen3-0.6B shapes (2.3 GiB) 3.0 GB
 * held after creation and 5.6 GB peak while creating it, against 2.5 GB for one copy
 * (docs/inference.md). So pre-packing stays on up to 1 GiB of float32 weights (about 270 M
 * parameters: a copy costs under a GiB) and is turned off above.
 */
export const PREPACKING_MAX_WEIGHT_BYTES = 1024 ** 3;

export interface PrepackingDecision {
  /** Whether ORT pre-packs the weights. */
  prepacking: boolean;
  /** 'option': an explicit setting; 'size': the weights' size against the threshold. */
  decidedBy: 'option' | 'size';
  /** Bytes of the float32 weights the graph is built from. */
  weightBytes: number;
  thresholdBytes: number;
}

/**
 * Weights above the threshold: a big model, whose generation session turns off pre-packing, the CPU arena
 * and the memory pattern, and which the inference engine loads through a file.
 */
export function isBigModel(weightBytes: number, thresholdBytes: number = PREPACKING_MAX_WEIGHT_BYTES): boolean {
  return weightBytes > thresholdBytes;
}

/** Pre-packing on unless the weights exceed `thresholdBytes`; an explicit `disablePrepacking` wins. */
export function prepackingDecision(weightBytes: number, disablePrepacking?: boolean, thresholdBytes: number = PREPACKING_MAX_WEIGHT_BYTES): PrepackingDecision {
  if (disablePrepacking !== undefined) return { prepacking: !disablePrepacking, decidedBy: 'option', weightBytes, thresholdBytes };
  return { prepacking: !isBigModel(weightBytes, thresholdBytes), decidedBy: 'size', weightBytes, thresholdBytes };
}

/** Bytes of a checkpoint's float32 weights. */
export function weightBytes(weights: ModelWeights): number {
  let bytes = 0;
  for (const w of weights.values()) bytes += w.data.byteLength;
  return bytes;
}
