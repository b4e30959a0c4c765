/** Outcome of comparing two multisets: the first predicted element without a partner, if any. */
export interface MultisetOutcome {
  /** True when every element is paired (the sizes must already be equal). */
  readonly equal: boolean;
  /** Index in `predicted` of an element that matched no remaining gold element. */
  readonly unmatchedIndex: number | undefined;
}

/** An element with hash keys, one per pairing pass; equal keys in a pass must imply `matches`. */
export interface Keyed {
  readonly keys: readonly string[];
}

/**
 * Order-insensitive multiset equality under a tolerant `matches` relation.
 * Elements are paired pass by pass on equal keys in O(n) — first the literal
 * text, then the parsed value — so that a prediction that copies a gold item
 * is paired with that item before a looser partner can take it. What is left
 * is paired greedily, first fit, and the scan stops at the first element
 * without a partner: one miss already makes the answer wrong. Greedy pairing
 * can in theory miss a perfect matching when several values lie within 1 % of
 * each other; the exact passes make that practically moot.
 */
export function matchMultiset<P extends Keyed, G extends Keyed>(
  predicted: readonly P[],
  gold: readonly G[],
  matches: (p: P, g: G) => boolean,
): MultisetOutcome {
  const goldUsed = new Uint8Array(gold.length);
  let pending: number[] = predicted.map((_, index) => index);
  const passes = Math.min(predicted[0]?.keys.length ?? 0, gold[0]?.keys.length ?? 0);
  for (let pass = 0; pass < passes && pending.length > 0; pass += 1) {
    const byKey = new Map<string, number[]>();
    gold.forEach((g, index) => {
      if (goldUsed[index] === 1) return;
      const key = g.keys[pass] as string;
      const bucket = byKey.get(key);
      if (bucket === undefined) byKey.set(key, [index]);
      else bucket.push(index);
    });
    const stillPending: number[] = [];
    for (const index of pending) {
      const partner = byKey.get((predicted[index] as P).keys[pass] as string)?.pop();
      if (partner === undefined) stillPending.push(index);
      else goldUsed[partner] = 1;
    }
    pending = stillPending;
  }
  for (const index of pending) {
    const p = predicted[index] as P;
    let found = false;
    for (let g = 0; g < gold.length; g += 1) {
      if (goldUsed[g] === 0 && matches(p, gold[g] as G)) {
        goldUsed[g] = 1;
        found = true;
        break;
      }
    }
    if (!found) return { equal: false, unmatchedIndex: index };
  }
  return { equal: predicted.length === gold.length, unmatchedIndex: undefined };
}
