/**
 * Interleaved rounds: every variant once per round, in the same order each round (A B A B ...), so a
 * load change on shared cores hits every variant alike instead of whichever ran last.
 */

export interface RoundSlot<V> {
  variant: V;
  round: number;
}

export interface RoundRun<V, R> extends RoundSlot<V> {
  result: R;
}

export interface RoundOptions {
  /** Odd rounds run the variants in reverse (A B B A ...): no variant always runs right after another. */
  mirrored?: boolean;
}

/** The order `interleavedRounds` runs in. */
export function roundOrder<V>(variants: readonly V[], rounds: number, options: RoundOptions = {}): RoundSlot<V>[] {
  if (!Number.isInteger(rounds) || rounds < 1) throw new Error(`rounds must be a positive integer, got ${rounds}`);
  return Array.from({ length: rounds }, (_, round) => {
    const order = options.mirrored === true && round % 2 === 1 ? [...variants].reverse() : variants;
    return order.map((variant) => ({ variant, round }));
  }).flat();
}

/** Runs each variant once per round, one at a time; `onRun` sees each result as it arrives (progress lines). */
export async function interleavedRounds<V, R>(
  variants: readonly V[],
  rounds: number,
  run: (variant: V, round: number) => R | Promise<R>,
  onRun?: (done: RoundRun<V, R>) => void,
  options: RoundOptions = {},
): Promise<RoundRun<V, R>[]> {
  const runs: RoundRun<V, R>[] = [];
  for (const slot of roundOrder(variants, rounds, options)) {
    const done = { ...slot, result: await run(slot.variant, slot.round) };
    onRun?.(done);
    runs.push(done);
  }
  return runs;
}

/** The results of each variant in round order, variants in their first-run order. */
export function resultsByVariant<V, R>(runs: readonly RoundRun<V, R>[]): Map<V, R[]> {
  const byVariant = new Map<V, R[]>();
  for (const { variant, result } of runs) byVariant.set(variant, [...(byVariant.get(variant) ?? []), result]);
  return byVariant;
}
