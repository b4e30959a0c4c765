import { describe, expect, it } from 'vitest';
import { deriveSeed, Rng } from './rng.ts';

describe('Rng', () => {
  it('repeats the same stream for the same seed and differs for another', () => {
    const draw = (seed: number): number[] => {
      const rng = new Rng(seed);
      return Array.from({ length: 20 }, () => rng.float());
    };
    expect(draw(42)).toEqual(draw(42));
    expect(draw(42)).not.toEqual(draw(43));
  });

  it('keeps int() within its inclusive bounds and reaches both ends', () => {
    const rng = new Rng(1);
    const seen = new Set(Array.from({ length: 2_000 }, () => rng.int(3, 7)));
    expect([...seen].sort()).toEqual([3, 4, 5, 6, 7]);
  });

  it('shuffles into a permutation and samples distinct items', () => {
    const rng = new Rng(9);
    const items = Array.from({ length: 30 }, (_, i) => i);
    const shuffled = rng.shuffle(items);
    expect([...shuffled].sort((a, b) => a - b)).toEqual(items);
    expect(shuffled).not.toEqual(items);
    expect(new Set(rng.sample(items, 10)).size).toBe(10);
  });

  it('respects weights roughly and never picks a zero weight', () => {
    const rng = new Rng(5);
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
    expect(new Rng(1).fork('x').float()).toBe(new Rng(1).fork('x').float());
  });

  it('produces money with at most two decimals inside the range', () => {
    const rng = new Rng(3);
    const amounts = Array.from({ length: 500 }, () => rng.money(1, 50));
    expect(Math.min(...amounts)).toBeGreaterThanOrEqual(1);
    expect(Math.max(...amounts)).toBeLessThanOrEqual(50);
    expect(amounts.filter((amount) => Math.round(amount * 100) / 100 !== amount)).toEqual([]);
  });
});
