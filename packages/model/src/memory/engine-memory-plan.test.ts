import { describe, expect, it } from 'vitest';
import { AppError, ErrorCode, memoryLimitFrom, type MemoryLimit } from '@sqlenv/shared';
import { presetConfig } from '../io/presets.ts';
import { kvBytesPerToken } from '../runtime/kv-cache.ts';
import { DEFAULT_KV_CACHE_MAX_BYTES, defaultKvCacheBytes, planEngineMemory } from './engine-memory-plan.ts';
import { countParameters } from './memory-estimate.ts';

const qwen3 = presetConfig('qwen3-0.6b');
const weightsBytes = countParameters(qwen3) * 4;

/** A 64 GB host in a container whose cgroup v2 memory.max is `bytes`. */
function containerLimit(bytes: number): MemoryLimit {
  return memoryLimitFrom({ hostBytes: 64e9, procSelfCgroup: '0::/\n', readFile: (path) => (path === '/sys/fs/cgroup/memory.max' ? `${bytes}\n` : undefined) });
}

describe('engine memory plan', () => {
  it('keeps the 4 GiB KV default where memory is plenty, and takes half of what the weights leave under a container limit', () => {
    expect(defaultKvCacheBytes(64e9, weightsBytes)).toBe(DEFAULT_KV_CACHE_MAX_BYTES);
    expect(defaultKvCacheBytes(4e9, weightsBytes)).toBe(Math.floor((4e9 - weightsBytes) / 2));
    expect(planEngineMemory({ config: qwen3, what: 'config.json', memoryLimit: containerLimit(4e9), maxBatchSize: 8 }).kvCacheBytes).toBe(Math.floor((4e9 - weightsBytes) / 2));
    // A caller's own budget is kept.
    expect(planEngineMemory({ config: qwen3, what: 'config.json', memoryLimit: containerLimit(4e9), kvCacheBytes: 1e6, maxBatchSize: 8 }).kvCacheBytes).toBe(1e6);
  });

  it('caps concurrency 256 at the turns whose KV fits the budget (the others queue), and leaves a batch that fits alone', () => {
    const turnTokens = 1000 + 64;
    const plan = planEngineMemory({ config: qwen3, what: 'config.json', memoryLimit: containerLimit(8e9), maxBatchSize: 256, turnTokens });
    const turnsThatFit = Math.floor(plan.kvCacheBytes / (turnTokens * kvBytesPerToken(qwen3)));
    expect(plan.maxBatchSize).toBe(turnsThatFit);
    expect(plan.maxBatchSize).toBeLessThan(256);
    expect(plan.maxBatchSize * turnTokens * kvBytesPerToken(qwen3) + plan.residentBytes).toBeLessThan(8e9);
    expect(planEngineMemory({ config: qwen3, what: 'config.json', memoryLimit: containerLimit(64e9), maxBatchSize: 4, turnTokens }).maxBatchSize).toBe(4);
  });

  it('refuses, before loading, weights and one turn that pass the limit, with the estimate and the limit', () => {
    let error: unknown;
    try {
      planEngineMemory({ config: qwen3, what: 'model/config.json', memoryLimit: containerLimit(2e9), maxBatchSize: 256, turnTokens: 1064 });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe(ErrorCode.VALIDATION);
    expect((error as Error).message).toMatch(/^model\/config\.json: needs at least 2\.[0-9]+ GB of memory, more than the cgroup v2 memory\.max limit \(\/sys\/fs\/cgroup\/memory\.max\), 2\.00 GB: weights 2\.38 GB/);
    expect((error as Error).message).toContain('activations/KV');
  });
});
