import { describe, expect, it } from 'vitest';
import { estimateGenerationMemory } from './attention-memory.ts';
import { DEFAULT_PREFILL_CHUNK_TOKENS } from '../graphs/generation-graph.ts';
import { presetConfig } from '../io/presets.ts';

const qwen3 = presetConfig('qwen3-0.6b'); // 28 layers, 16 / 8 heads × 128

describe('estimateGenerationMemory', () => {
  it('Qwen3-0.6B, 8 rows × 1,024 prompt tokens: the cache and chunked scores, by hand', () => {
    const e = estimateGenerationMemory(qwen3, { rows: 8, promptTokens: 1024, newTokens: 0, prefillChunkTokens: 128 });
    expect(e.kvCacheBytes).toBe(8 * 28 * 2 * 8 * 1024 * 128 * 4); // 1.75 GiB
    expect(e.scoresBytes).toBe(8 * 16 * 128 * 1024 * 4); // 64 MiB, not the whole prompt's 512 MiB
    expect(e.attentionWorkspaceBytes).toBe(3 * e.scoresBytes + 8 * 128 * 1024 * 4);
    expect(e.peakBytes).toBe(e.kvCacheBytes + e.kvCacheBytes / 28 + e.attentionWorkspaceBytes); // the cache once
    const kept = estimateGenerationMemory(qwen3, { rows: 8, promptTokens: 1024, newTokens: 0, prefillChunkTokens: 128, keepCache: true });
    expect(kept.peakBytes - e.peakBytes).toBe(e.kvCacheBytes); // and in the outputs when the run returns it
    const whole = estimateGenerationMemory(qwen3, { rows: 8, promptTokens: 1024, prefillChunkTokens: Infinity });
    expect(whole.scoresBytes).toBe(8 * 16 * 1024 * 1024 * 4);
  });

  it('grows linearly with the context when chunked, with its square when not', () => {
    const at = (promptTokens: number, prefillChunkTokens: number) => estimateGenerationMemory(qwen3, { rows: 4, promptTokens, newTokens: 0, prefillChunkTokens }).attentionWorkspaceBytes;
    expect(at(2048, 128) / at(1024, 128)).toBeCloseTo(2, 6);
    expect(at(2048, Infinity) / at(1024, Infinity)).toBeCloseTo(4, 6);
    expect(at(64, 128)).toBe(at(64, Infinity)); // a prompt within one chunk is one pass either way
  });

  it('counts decode steps: one query against the final width', () => {
    const e = estimateGenerationMemory(qwen3, { rows: 2, promptTokens: 1, newTokens: 500 });
    expect(e.scoresBytes).toBe(2 * 16 * 501 * 4);
    expect(e.kvCacheBytes).toBe(2 * 28 * 2 * 8 * 501 * 128 * 4);
    expect(estimateGenerationMemory(qwen3, { rows: 1, promptTokens: 300 }).scoresBytes).toBe(16 * DEFAULT_PREFILL_CHUNK_TOKENS * 300 * 4);
  });

  it('refuses shapes that are not counts, naming the field', () => {
    expect(() => estimateGenerationMemory(qwen3, { rows: -1, promptTokens: 4 })).toThrow(/rows must be an integer ≥ 0, got -1/);
    expect(() => estimateGenerationMemory(qwen3, { rows: 1, promptTokens: 4.5 })).toThrow(/promptTokens must be an integer ≥ 0, got 4.5/);
    expect(() => estimateGenerationMemory(qwen3, { rows: 1, promptTokens: 4, prefillChunkTokens: 0 })).toThrow(/prefillChunkTokens must be ≥ 1, got 0/);
  });
});
