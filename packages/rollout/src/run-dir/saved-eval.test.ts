import { describe, expect, it } from 'vitest';
import { successInterval, wilsonInterval } from './saved-eval.ts';

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
