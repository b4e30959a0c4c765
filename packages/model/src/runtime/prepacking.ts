import type { ModelWeights } from '../io/weights.ts';

/**
 * Whether ONNX Runtime pre-packs the generation graph's weights (`session.disable_prepacking`).
 *
 * Pre-packing lays each linear weight out for ORT's GEMM once per consuming node, and the
 * generation graph has several (the prefill loops and the decode loop), so a pre-packed session
 * holds extra copies of every linear weight. For small models that memory is nothing and the packed
 * GEMMs are faster; for big ones it is gigabytes. bench/results/prepacking.md (one thread, the
 * 2-core development machine): sqlenv-tiny (8 MiB of weights) 5–14 % faster pre-packed, the same
 * memory; SmolLM2-135M shapes (516 MiB) about 15 % faster for about 500 MiB more; Qwen3-0.6B
 * shapes (2.3 GiB) 3.0 GB held after creation and 5.6 GB peak while creating it, against the
 * 2.5 GB of one copy (docs/inference.md). So pre-packing stays on up to 1 GiB of float32 weights
 * (about 270 M parameters) and is turned off above.
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

/** Pre-packing on unless the weights exceed `thresholdBytes`; an explicit `disablePrepacking` wins. */
export function prepackingDecision(weightBytes: number, disablePrepacking?: boolean, thresholdBytes: number = PREPACKING_MAX_WEIGHT_BYTES): PrepackingDecision {
  if (disablePrepacking !== undefined) return { prepacking: !disablePrepacking, decidedBy: 'option', weightBytes, thresholdBytes };
  return { prepacking: weightBytes <= thresholdBytes, decidedBy: 'size', weightBytes, thresholdBytes };
}

/** Bytes of a checkpoint's float32 weights. */
export function weightBytes(weights: ModelWeights): number {
  let bytes = 0;
  for (const w of weights.values()) bytes += w.data.byteLength;
  return bytes;
}
