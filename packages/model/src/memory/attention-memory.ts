import { AppError, ErrorCode } from '@sqlenv/shared';
import type { ModelConfig } from '../io/config.ts';
import { DEFAULT_PREFILL_CHUNK_TOKENS } from '../graphs/generation-graph.ts';

/**
 * What one generation run holds beyond the weights, from the shapes of the
 * generation graph (generation-graph.ts): the KV cache, and the attention
 * workspace of the widest loop iteration. Lets a scheduler bound a batch by
 * a memory budget instead of by rows × width².
 *
 * Per layer the attention materialises (B, Hq, T, S) float32 scores, adds
 * the (B, 1, 1, T, S) bias and takes the softmax: up to three buffers of that
 * size are alive at once (ONNX Runtime frees each when its last consumer has
 * run). T is the iteration's query slots: at most the prefill chunk C, one
 * while decoding; S its key slots, at most the run's final width. The cache
 * is (B, Hkv, S, D) keys and values per layer, held once: the prefill appends
 * a layer's new keys and values to its past once, and the decode loop reads
 * that from the outer scope and carries only the tokens it decodes. On top,
 * while a layer's prompt chunks run, its keys in the transposed layout the
 * scores read and a chunk's slices of its keys and values (at most one
 * layer's share of the cache); and a run that returns its cache (`keepCache`)
 * holds it a second time in its outputs at the end.
 */
export interface GenerationMemoryShape {
  /** Rows of the batch. */
  rows: number;
  /** Prompt slots after left padding, in tokens. */
  promptTokens: number;
  /** New tokens per row (the width grows by this much). Default 0: the prefill alone. */
  newTokens?: number;
  /** The graph's prefill chunk, in tokens (default DEFAULT_PREFILL_CHUNK_TOKENS; Infinity: the whole prompt). */
  prefillChunkTokens?: number;
  /** Whether the run returns its cache (the `keep_cache` input; the turn scheduler's runs do). Default false. */
  keepCache?: boolean;
}

export interface GenerationMemoryEstimate {
  /** One copy of the final KV cache: rows × layers × 2 × Hkv × width × D × 4 bytes. */
  kvCacheBytes: number;
  /** One (rows, Hq, min(C, P), width) float32 score buffer: the widest iteration's. */
  scoresBytes: number;
  /** The attention workspace at its peak: three score buffers and the bias. */
  attentionWorkspaceBytes: number;
  /**
   * Everything above at the peak: the cache once, one layer's share of it again (its transposed keys
   * and a chunk's slices during the prefill), the workspace; with `keepCache` the returned cache too.
   */
  peakBytes: number;
}

/** Score-sized float32 buffers alive at once in one layer's attention (scores, biased scores, probabilities). */
const SCORE_BUFFERS = 3;
const FLOAT32_BYTES = 4;

export function estimateGenerationMemory(config: ModelConfig, shape: GenerationMemoryShape): GenerationMemoryEstimate {
  const { rows, promptTokens, newTokens = 0, prefillChunkTokens = DEFAULT_PREFILL_CHUNK_TOKENS, keepCache = false } = shape;
  for (const [field, value] of [['rows', rows], ['promptTokens', promptTokens], ['newTokens', newTokens]] as const) {
    if (!Number.isInteger(value) || value < 0) throw new AppError(ErrorCode.VALIDATION, `estimateGenerationMemory: ${field} must be an integer ≥ 0, got ${value}`);
  }
  if (!(prefillChunkTokens >= 1)) throw new AppError(ErrorCode.VALIDATION, `estimateGenerationMemory: prefillChunkTokens must be ≥ 1, got ${prefillChunkTokens}`);
  const { numLayers: L, numHeads: Hq, numKvHeads: Hkv, headDim: D } = config;
  const widthTokens = promptTokens + newTokens;
  const queries = Math.max(Math.min(prefillChunkTokens, promptTokens), newTokens > 0 ? 1 : 0); // widest iteration's T
  const kvCacheBytes = rows * L * 2 * Hkv * widthTokens * D * FLOAT32_BYTES;
  // The prefill's last chunk sees S = P keys, a decode step S ≤ width with T = 1: take the larger.
  const scoresBytes = Math.max(rows * Hq * queries * promptTokens, rows * Hq * widthTokens) * FLOAT32_BYTES;
  const biasBytes = Math.max(rows * queries * promptTokens, rows * widthTokens) * FLOAT32_BYTES;
  const attentionWorkspaceBytes = SCORE_BUFFERS * scoresBytes + biasBytes;
  const peakBytes = kvCacheBytes + kvCacheBytes / L + attentionWorkspaceBytes + (keepCache ? kvCacheBytes : 0);
  return { kvCacheBytes, scoresBytes, attentionWorkspaceBytes, peakBytes };
}
