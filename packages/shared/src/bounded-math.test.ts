import { describe, expect, it } from 'vitest';
import { appendAll, maxOf, minOf } from './bounded-math.ts';

describe('minOf / maxOf / appendAll', () => {
  it('agree with Math.min/Math.max on small arrays, NaN and empty input included', () => {
    for (const xs of [[3, -1, 2], [5], [1, Number.NaN, 2], [-Infinity, 4]]) {
      expect(minOf(xs)).toBe(Math.min(...xs));
      expect(maxOf(xs)).toBe(Math.max(...xs));
    }
    expect(minOf([])).toBe(Infinity);
    expect(maxOf([], 0)).toBe(0);
  });

  it('handle arrays far past the call-argument limit that the spread forms throw on', () => {
    const xs = Array.from({ length: 1_000_000 }, (_, i) => (i * 7919) % 1_000_003);
    expect(() => Math.max(...xs)).toThrow(RangeError);
    expect(maxOf(xs)).toBe(1_000_002);
    expect(minOf(xs)).toBe(0);
    const out = appendAll([1], xs);
    expect(out).toHaveLength(1_000_001);
    expect(out[1_000_000]).toBe(xs.at(-1));
  });
});
