/** Outcome of comparing two multisets: the first predicted element without a partner, if any. */
export interface MultisetOutcome {
  /** True when every element is paired (the sizes must already be equal). */
  readonly equal: boolean;
  /** Index in `predicted` of an element that matched no remaining gold element. */
  readonly unmatchedIndex: number | undefined;
}

/**
 * Order-insensitive multiset equality under a tolerant `matches` relation.
 * Elements with equal keys are paired first in O(n) (equal keys must imply a
 * match); what is left is paired greedily, first fit, and the scan stops at
 * the first element without a partner — one miss already makes the answer
 * wrong. Greedy pairing can in theory miss a perfect matching when several
 * values lie within 1 % of each other; exact keys make that practically moot.
 */
export function matchMultiset<P extends { key: string }, G extends { key: string }>(
  predicted: readonly P[],
  gold: readonly G[],
  matches: (p: P, g: G) => boolean,
): MultisetOutcome {
  const byKey = new Map<string, number[]>();
  gold.forEach((g, index) => {
    const bucket = byKey.get(g.key);
    if (bucket === undefined) byKey.set(g.key, [index]);
    else bucket.push(index);
  });
  const used = new Uint8Array(gold.length);
  const leftovers: number[] = [];
  predicted.forEach((p, index) => {
    const bucket = byKey.get(p.key);
    const partner = bucket?.pop();
    if (partner === undefined) leftovers.push(index);
    else used[partner] = 1;
  });
  for (const index of leftovers) {
    const p = predicted[index] as P;
    let found = false;
    for (let g = 0; g < gold.length; g += 1) {
      if (used[g] === 0 && matches(p, gold[g] as G)) {
        used[g] = 1;
        found = true;
        break;
      }
    }
    if (!found) return { equal: false, unmatchedIndex: index };
  }
  return { equal: predicted.length === gold.length, unmatchedIndex: undefined };
}
