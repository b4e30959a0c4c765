import { describe, expect, it } from 'vitest';
import { seededIndex } from './seeded-index.ts';

describe('seededIndex', () => {
  it('is a pure function of seed and size', () => {
    expect(seededIndex(42, 1000)).toBe(seededIndex(42, 1000));
    expect(seededIndex(2 ** 40 + 7, 77)).toBe(seededIndex(2 ** 40 + 7, 77));
  });

  it('stays in range and spreads consecutive seeds over the pool', () => {
    const seen = new Set<number>();
    for (let seed = 0; seed < 500; seed += 1) {
      const index = seededIndex(seed, 50);
      expect(index).toBeGreaterThanOrEqual(0);
      expect(index).toBeLessThan(50);
      seen.add(index);
    }
    expect(seen.size).toBeGreaterThan(45);
    expect([0, 1, 2, 3].map((seed) => seededIndex(seed, 1000))).not.toEqual([0, 1, 2, 3]);
  });
});
