import { describe, expect, it } from 'vitest';
import { passAtK, passAtKEstimate, passAtKs } from './pass-at-k.ts';

/** n samples of one question, the first c of them solved. */
const question = (id: string, n: number, c: number): Array<{ question: string; success: boolean }> =>
  Array.from({ length: n }, (_, i) => ({ question: id, success: i < c }));

describe('pass@k', () => {
  it('matches 1 − C(n−c, k)/C(n, k) computed by hand', () => {
    // n 8, c 1: any draw of k holds the one success with probability k/8.
    expect(passAtKEstimate(8, 1, 1)).toBeCloseTo(1 / 8, 12);
    expect(passAtKEstimate(8, 1, 4)).toBeCloseTo(4 / 8, 12);
    expect(passAtKEstimate(8, 1, 8)).toBe(1);
    // n 8, c 2, k 4: 1 − C(6,4)/C(8,4) = 1 − 15/70.
    expect(passAtKEstimate(8, 2, 4)).toBeCloseTo(1 - 15 / 70, 12);
    // n 10, c 3, k 4: 1 − C(7,4)/C(10,4) = 1 − 35/210.
    expect(passAtKEstimate(10, 3, 4)).toBeCloseTo(1 - 35 / 210, 12);
    // pass@1 is the plain success rate.
    expect(passAtKEstimate(7, 3, 1)).toBeCloseTo(3 / 7, 12);
    // Fewer failures than k: certain; no success: impossible.
    expect(passAtKEstimate(8, 5, 4)).toBe(1);
    expect(passAtKEstimate(8, 0, 8)).toBe(0);
    // Large n stays finite (C(480, 240) would overflow a double).
    expect(passAtKEstimate(480, 240, 8)).toBeCloseTo(1 - 0.5 ** 8, 2);
  });

  it('refuses k > n and impossible counts', () => {
    expect(() => passAtKEstimate(3, 1, 4)).toThrow(/pass@4 needs at least 4 samples/);
    expect(() => passAtKEstimate(3, 4, 1)).toThrow(RangeError);
    expect(() => passAtKEstimate(3, 1, 0)).toThrow(RangeError);
  });

  it('averages the per-question estimates over questions, whatever order the episodes come in', () => {
    // q1: 1 of 8; q2: 2 of 8; q3: 0 of 8; q4: 8 of 8.
    const outcomes = [...question('q1', 8, 1), ...question('q2', 8, 2), ...question('q3', 8, 0), ...question('q4', 8, 8)].reverse();
    const p = passAtKs(outcomes);
    expect(p['1']).toBeCloseTo((1 / 8 + 2 / 8 + 0 + 1) / 4, 12);
    expect(p['4']).toBeCloseTo((4 / 8 + (1 - 15 / 70) + 0 + 1) / 4, 12);
    expect(p['8']).toBeCloseTo((1 + 1 + 0 + 1) / 4, 12);
    // pass@k never falls as k grows.
    expect(p['1'] as number).toBeLessThanOrEqual(p['4'] as number);
    expect(p['4'] as number).toBeLessThanOrEqual(p['8'] as number);
  });

  it('is null for k above the samples of some question, and for no episodes', () => {
    const outcomes = [...question('q1', 8, 1), ...question('q2', 4, 2)];
    // q2 at k 4: 2 failures < 4 draws, so certain.
    expect(passAtKs(outcomes)).toEqual({ '1': (1 / 8 + 2 / 4) / 2, '4': (4 / 8 + 1) / 2, '8': null });
    expect(passAtK([], 1)).toBeNull();
    // One sample per question: only pass@1.
    expect(passAtKs(question('q', 1, 1))).toEqual({ '1': 1, '4': null, '8': null });
  });
});
