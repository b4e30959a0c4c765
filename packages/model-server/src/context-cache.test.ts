import { describe, expect, it } from 'vitest';
import { ContextCache } from './context-cache.ts';

describe('ContextCache', () => {
  it('continues the longest recorded sequence a prompt starts with, once', () => {
    const cache = new ContextCache(8);
    cache.record('m', [1, 2, 3], 'short');
    cache.record('m', [1, 2, 3, 4, 5], 'long');
    expect(cache.claim('m', [1, 2, 3, 4, 5, 6, 7])).toBe('long');
    // Claimed: a second request with the same context gets the next best, then nothing.
    expect(cache.claim('m', [1, 2, 3, 4, 5, 6, 7])).toBe('short');
    expect(cache.claim('m', [1, 2, 3, 4, 5, 6, 7])).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('never matches a sequence that differs anywhere, nor one longer than the prompt, nor another partition', () => {
    const cache = new ContextCache(8);
    cache.record('m', [1, 2, 3], 'k');
    expect(cache.claim('m', [1, 9, 3, 4])).toBeUndefined();
    expect(cache.claim('m', [1, 2])).toBeUndefined();
    expect(cache.claim('other', [1, 2, 3, 4])).toBeUndefined();
    expect(cache.claim('m', [1, 2, 3])).toBe('k');
  });

  it('drops the least recently recorded entries beyond its bound', () => {
    const cache = new ContextCache(2);
    cache.record('m', [1], 'a');
    cache.record('m', [2], 'b');
    cache.record('m', [3], 'c');
    expect(cache.size).toBe(2);
    expect(cache.claim('m', [1, 5])).toBeUndefined();
    expect(cache.claim('m', [3, 5])).toBe('c');
  });

  it('re-recording a sequence replaces its key; dropping partitions forgets them', () => {
    const cache = new ContextCache(8);
    cache.record('m|x', [4, 4], 'old');
    cache.record('m|x', [4, 4], 'new');
    cache.record('n|x', [4, 4], 'other');
    expect(cache.size).toBe(2);
    cache.dropPartitions((p) => p.startsWith('n|'));
    expect(cache.claim('n|x', [4, 4, 1])).toBeUndefined();
    expect(cache.claim('m|x', [4, 4, 1])).toBe('new');
  });
});
