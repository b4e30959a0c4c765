import { describe, expect, it } from 'vitest';
import { weightsToPrune } from './weights-retention.ts';

describe('weightsToPrune', () => {
  const committed = Array.from({ length: 10 }, (_, i) => ({ version: i + 1, key: `r/weights/v${i + 1}-attempt${i % 3}` }));

  it('keeps the newest K, every checkpointEvery-th version and the protected keys; prunes the rest', () => {
    const prune = weightsToPrune(committed, { keepLast: 3, checkpointEvery: 4 }, new Set(['r/weights/v2-attempt1']));
    expect(prune).toEqual(['r/weights/v1-attempt0', 'r/weights/v3-attempt2', 'r/weights/v5-attempt1', 'r/weights/v6-attempt2', 'r/weights/v7-attempt0']);
  });

  it('never prunes the newest version, whatever K says, and nothing when there is nothing', () => {
    expect(weightsToPrune(committed, { keepLast: 0, checkpointEvery: 0 }, new Set())).not.toContain('r/weights/v10-attempt0');
    expect(weightsToPrune([], { keepLast: 1, checkpointEvery: 0 }, new Set())).toEqual([]);
  });
});
