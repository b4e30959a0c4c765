import { describe, expect, it } from 'vitest';
import { boxMullerNormals, deriveSeed, hashString, mixSeeds, Mulberry32, mulberry32, Xoshiro128 } from './prng.ts';

describe('Mulberry32', () => {
  it('repeats the same stream for the same seed and differs for another', () => {
    const draw = (seed: number): number[] => {
      const rng = new Mulberry32(seed);
      return Array.from({ length: 20 }, () => rng.float());
    };
    expect(draw(42)).toEqual(draw(42));
    expect(draw(42)).not.toEqual(draw(43));
  });

  it('keeps int() within its inclusive bounds and reaches both ends', () => {
    const rng = new Mulberry32(1);
    const seen = new Set(Array.from({ length: 2_000 }, () => rng.int(3, 7)));
    expect([...seen].sort()).toEqual([3, 4, 5, 6, 7]);
  });

  it('shuffles into a permutation and samples distinct items', () => {
    const rng = new Mulberry32(9);
    const items = Array.from({ length: 30 }, (_, i) => i);
    const shuffled = rng.shuffle(items);
    expect([...shuffled].sort((a, b) => a - b)).toEqual(items);
    expect(shuffled).not.toEqual(items);
    expect(new Set(rng.sample(items, 10)).size).toBe(10);
  });

  it('respects weights roughly and never picks a zero weight', () => {
    const rng = new Mulberry32(5);
    const counts = { a: 0, b: 0, c: 0 };
    for (let i = 0; i < 4_000; i++) counts[rng.weighted([['a', 3], ['b', 1], ['c', 0]] as const)]++;
    expect(counts.c).toBe(0);
    expect(counts.a / counts.b).toBeGreaterThan(2.4);
    expect(counts.a / counts.b).toBeLessThan(3.7);
  });

  it('derives independent, label-specific child streams', () => {
    expect(deriveSeed(1, 'rows')).toBe(deriveSeed(1, 'rows'));
    expect(deriveSeed(1, 'rows')).not.toBe(deriveSeed(1, 'questions'));
    expect(deriveSeed(1, 'rows')).not.toBe(deriveSeed(2, 'rows'));
    expect(new Mulberry32(1).fork('x').float()).toBe(new Mulberry32(1).fork('x').float());
  });

  it('produces money with at most two decimals inside the range', () => {
    const rng = new Mulberry32(3);
    const amounts = Array.from({ length: 500 }, () => rng.money(1, 50));
    expect(Math.min(...amounts)).toBeGreaterThanOrEqual(1);
    expect(Math.max(...amounts)).toBeLessThanOrEqual(50);
    expect(amounts.filter((amount) => Math.round(amount * 100) / 100 !== amount)).toEqual([]);
  });
});

describe('the pinned streams', () => {
  // Datasets, initial weights and sampling seeds depend on these exact values.
  it('gives the same numbers as when they were pinned', () => {
    const next = mulberry32(12345);
    expect([next(), next()]).toEqual([0.9797282677609473, 0.3067522644996643]);
    expect([mixSeeds(7, 99), mixSeeds(-3, 2 ** 32 - 1), hashString('hello'), deriveSeed(42, 'rows')]).toEqual([1749300015, 1918689678, 1335831723, 3059736804]);
    const rng = new Mulberry32(7);
    expect([rng.float(), rng.int(1, 9), rng.shuffle([1, 2, 3, 4, 5, 6]), rng.money(1, 50)]).toEqual([0.011704753153026104, 1, [5, 1, 2, 3, 4, 6], 12.76]);
    const x = new Xoshiro128(3);
    expect([x.nextUint32(), x.uniform(), x.normal(), x.normal()]).toEqual([3088717543, 0.6439171007368714, 0.9824215149310853, -0.031579678964689516]);
    expect(boxMullerNormals(mulberry32(9), 2)).toEqual([1.0676790086483097, 0.8603569306512218]);
  });
});
