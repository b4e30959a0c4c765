import type { WeightsRetention } from './transport.ts';
import { maxOf } from '@sqlenv/shared';

/**
 * Which committed weights to delete (docs/operations.md, "Clean-up"). Workers load the newest
 * committed version when they attach and whenever a new one is announced, never an older one, so
 * only a worker still downloading a version that was just superseded can need an old blob: keeping
 * the newest `keepLast` (≥ 1; default 3) covers that. Checkpoints (every `checkpointEvery`-th
 * version, and the ones pinned by name) and the current version are never deleted. The commit
 * history (version → key, written by the commit itself) is the source of truth: keys are whatever
 * the trainer wrote, never reconstructed from a naming scheme.
 */
export function weightsToPrune(committed: ReadonlyArray<{ version: number; key: string }>, retention: WeightsRetention, protectedKeys: ReadonlySet<string>): string[] {
  if (committed.length === 0) return [];
  const newest = maxOf(committed.map((c) => c.version));
  const keepFrom = newest - Math.max(1, retention.keepLast) + 1;
  return committed
    .filter((c) => c.version < keepFrom && !protectedKeys.has(c.key) && !(retention.checkpointEvery > 0 && c.version % retention.checkpointEvery === 0))
    .map((c) => c.key);
}
