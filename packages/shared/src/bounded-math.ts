/**
 * Reductions over arrays of any length. `Math.min(...xs)`, `Math.max(...xs)`,
 * `out.push(...xs)` and `String.fromCharCode(...bytes)` pass every element as
 * a call argument, and V8 throws "Maximum call stack size exceeded" past about
 * 100,000 of them (fewer on a deep stack): a long run's metrics file was
 * enough to break its report. These loop instead; the lint config forbids the
 * spread forms of Math.min/Math.max outside tests.
 */

/** The smallest value, or `empty` when there is none (Math.min() of nothing would be Infinity). */
export function minOf(values: Iterable<number>, empty = Number.POSITIVE_INFINITY): number {
  let min = Number.POSITIVE_INFINITY;
  let any = false;
  for (const v of values) {
    any = true;
    // NaN propagates as it does through Math.min.
    if (v < min || Number.isNaN(v)) min = v;
    if (Number.isNaN(min)) return Number.NaN;
  }
  return any ? min : empty;
}

/** The largest value, or `empty` when there is none (Math.max() of nothing would be -Infinity). */
export function maxOf(values: Iterable<number>, empty = Number.NEGATIVE_INFINITY): number {
  let max = Number.NEGATIVE_INFINITY;
  let any = false;
  for (const v of values) {
    any = true;
    if (v > max || Number.isNaN(v)) max = v;
    if (Number.isNaN(max)) return Number.NaN;
  }
  return any ? max : empty;
}

/** Append every item of `items` to `target` (push(...items) with no argument-count limit); returns target. */
export function appendAll<T>(target: T[], items: Iterable<T>): T[] {
  for (const item of items) target.push(item);
  return target;
}
