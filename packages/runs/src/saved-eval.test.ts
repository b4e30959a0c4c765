import { describe, expect, it } from 'vitest';
import { pairedDifferenceOf, passAtKOf, successInterval, wilsonInterval } from './saved-eval.ts';

describe('wilsonInterval', () => {
  it('matches the Wilson score interval computed by hand', () => {
    // k = 5 of 10: centre 0.5, half-width (1.96 / 1.38415) · √(0.025 + 1.96² / 400) = 0.26340.
    const [low, high] = wilsonInterval(5, 10);
    expect(low).toBeCloseTo(0.2366, 4);
    expect(high).toBeCloseTo(0.7634, 4);
    // k = 0 stays at 0 and still has a positive upper bound (the normal approximation gives [0, 0]).
    const [zeroLow, zeroHigh] = wilsonInterval(0, 10);
    expect(zeroLow).toBe(0);
    expect(zeroHigh).toBeCloseTo(0.2775, 4);
    // Symmetric under k ↔ n − k; narrower with more episodes.
    const [allLow, allHigh] = wilsonInterval(10, 10);
    expect(allHigh).toBe(1);
    expect(allLow).toBeCloseTo(1 - zeroHigh, 12);
    const wide = wilsonInterval(30, 100);
    const narrow = wilsonInterval(300, 1000);
    expect(narrow[1] - narrow[0]).toBeLessThan(wide[1] - wide[0]);
    expect(wilsonInterval(0, 0)).toEqual([0, 1]);
  });

  it('counts the correct episodes of a saved evaluation', () => {
    const episodes = [true, false, true, true].map((correct) => ({ correct }));
    const interval = successInterval({ episodes } as never);
    expect(interval).toMatchObject({ successes: 3, episodes: 4, rate: 0.75 });
    expect(interval.ci95).toEqual(wilsonInterval(3, 4));
  });
});

describe('pass@k and the paired difference of saved evaluations', () => {
  const episode = (question_id: string, seed: number, correct: boolean) => ({ question_id, seed, correct }) as never;

  it('computes pass@k from the episodes of a file that predates it, and keeps a saved one', () => {
    const episodes = [episode('a', 0, true), episode('a', 1, false), episode('b', 2, false), episode('b', 3, false)];
    expect(passAtKOf({ episodes })).toEqual({ '1': 0.25, '4': null, '8': null });
    expect(passAtKOf({ episodes, pass_at_k: { '1': 0.5 } })).toEqual({ '1': 0.5 });
  });

  it('pairs by question and seed, and is null when the two evaluations share no episode', () => {
    const before = { episodes: [episode('a', 0, false), episode('b', 1, true), episode('c', 2, false)] };
    const after = { episodes: [episode('a', 0, true), episode('b', 1, true), episode('c', 9, true)] };
    // c was played at different seeds: left out. a gained, b stayed right: +1 of 2 pairs.
    expect(pairedDifferenceOf(before, after)).toMatchObject({ diff: 0.5, questions: 2, episodes: 2, resamples: 10_000 });
    expect(pairedDifferenceOf(before, { episodes: [episode('c', 9, true)] })).toBeNull();
  });
});
