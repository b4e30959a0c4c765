import type { MemoryLimit } from '@sqlenv/shared';
import type { ModelConfig } from '../io/config.ts';
import type { LoraTarget } from '../graphs/lora-targets.ts';
import { kvBytesPerToken } from '../runtime/kv-cache.ts';
import { checkModelFits } from './memory-estimate.ts';

/** The KV budget's ceiling when the caller sets none: 4 GiB holds 8 Qwen3-0.6B turns of 2,300 tokens (224 KiB per token). */
export const DEFAULT_KV_CACHE_MAX_BYTES = 4 * 1024 * 1024 * 1024;

/**
 * Share of what the memory limit leaves after the weights that the default KV budget may take.
 * Half: the weights estimate is one float32 copy, and ONNX Runtime may hold a pre-packed copy of
 * most of them besides (prepacking.ts), its arena keeps a run's intermediates (a prefill's scores
 * alone up to 256 MiB), and the process's own heap and SQL environments live there too. The KV
 * cache is the one part that grows with the number of turns, so it is the part that yields.
 */
export const KV_SHARE_OF_FREE_MEMORY = 0.5;

/** The smallest default KV budget (a turn that alone exceeds the budget still runs, by itself). */
const MIN_KV_CACHE_BYTES = 16 * 1024 * 1024;

/** The engine's KV budget when the caller sets none: min(4 GiB, half of the limit less what stays resident). */
export function defaultKvCacheBytes(limitBytes: number, residentBytes: number): number {
  const share = Math.floor(KV_SHARE_OF_FREE_MEMORY * Math.max(0, limitBytes - residentBytes));
  return Math.max(MIN_KV_CACHE_BYTES, Math.min(DEFAULT_KV_CACHE_MAX_BYTES, share));
}

export interface EngineMemoryPlanInput {
  config: ModelConfig;
  /** Names the model in a refusal (its config.json path). */
  what: string;
  memoryLimit: MemoryLimit;
  lora?: { rank: number; targets: readonly LoraTarget[] } | undefined;
  /** The caller's KV budget; default: defaultKvCacheBytes. */
  kvCacheBytes?: number | undefined;
  /** The rows asked for (a run's concurrency). */
  maxBatchSize: number;
  /** The fewest tokens a turn reserves (system prompt + max new tokens): the batch is capped at the turns whose KV fits the budget. */
  turnTokens?: number | undefined;
}

export interface EngineMemoryPlan {
  kvCacheBytes: number;
  /** `maxBatchSize` capped by the turns that fit `kvCacheBytes` (at least 1): the other turns wait their turn. */
  maxBatchSize: number;
  /** Weights and adapter, float32. */
  residentBytes: number;
}

/**
 * What an engine may allocate under the memory limit, before anything is loaded: refuses (AppError
 * VALIDATION, checkModelFits) when the weights, the adapter and one turn's KV cache alone pass the
 * limit; otherwise the KV budget and the batch cap that keep the engine under it.
 */
export function planEngineMemory(input: EngineMemoryPlanInput): EngineMemoryPlan {
  const estimate = checkModelFits(input.config, input.what, {
    memoryLimit: input.memoryLimit,
    ...(input.lora === undefined ? {} : { lora: input.lora }),
    ...(input.turnTokens === undefined ? {} : { batchSize: 1, contextTokens: input.turnTokens }),
  });
  const residentBytes = estimate.weightsBytes + estimate.loraBytes;
  const kvCacheBytes = input.kvCacheBytes ?? defaultKvCacheBytes(input.memoryLimit.bytes, residentBytes);
  if (input.turnTokens === undefined) return { kvCacheBytes, maxBatchSize: input.maxBatchSize, residentBytes };
  const turnsThatFit = Math.floor(kvCacheBytes / (input.turnTokens * kvBytesPerToken(input.config)));
  return { kvCacheBytes, maxBatchSize: Math.max(1, Math.min(input.maxBatchSize, turnsThatFit)), residentBytes };
}
