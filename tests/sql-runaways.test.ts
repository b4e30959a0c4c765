/**
 * Several runaway queries at once, with real child processes: quick queries
 * must keep being answered (correctly, and without waiting for any runaway's
 * timeout) while 1, 3 or 6 runaways are in flight, and a runaway that had to
 * wait for a child says how long it waited and how long it actually ran.
 *
 * The runaways get a long timeout (RUNAWAY_TIMEOUT_MS) and every quick query
 * must be answered while all of them are still running: a load-independent
 * check (no wall-clock bound on the quick queries themselves), which fails
 * whenever a quick query had to wait for a runaway to be cut off.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode, type AppError } from '@sqlenv/shared';
import { SqlExecutor } from '@sqlenv/sql-env';
import { makeTestDb } from '@sqlenv/sql-env/testing';

const RUNAWAY_SQL = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c';
/** Long, so that no load can make a runaway end before the quick queries are done. */
const RUNAWAY_TIMEOUT_MS = 120_000;
const QUICK_QUERIES = 12;

let fixture: ReturnType<typeof makeTestDb>;
beforeAll(() => {
  fixture = makeTestDb('sql-runaways-');
});
afterAll(() => fixture.cleanup());

/** Until `check` holds or `limitMs` passes (whichever first). */
async function waitFor(check: () => boolean, limitMs: number): Promise<void> {
  const deadline = performance.now() + limitMs;
  while (!check() && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
}

describe.each([1, 3, 6])('with %i runaway queries in flight', (runaways) => {
  it('quick queries are answered, correctly, before any runaway is cut off', async () => {
    // The defaults a server gets on a small machine (pool of 2, one spare); the fast path off so every
    // quick query goes through a child, as a never-seen statement would.
    const executor = new SqlExecutor({ poolSize: 2, spareChildren: 1, inProcessMaxMs: 0 });
    try {
      await executor.whenReady({ spares: true });
      const settled: string[] = [];
      const pending = Array.from({ length: runaways }, (_, i) =>
        executor.query(fixture.dbPath, `${RUNAWAY_SQL} -- runaway ${i}`, { timeoutMs: RUNAWAY_TIMEOUT_MS }).then(
          () => settled.push(`runaway ${i} answered`),
          (error: unknown) => settled.push(`runaway ${i}: ${(error as Error).message}`),
        ),
      );
      // Each runaway is running (on a child of its own where the executor gives it one).
      await waitFor(() => executor.stats().stuck >= runaways, 20_000);

      for (let i = 0; i < QUICK_QUERIES; i += 1) {
        // A new text each time: nothing is remembered as fast.
        const result = await Promise.race([
          executor.query(fixture.dbPath, `SELECT count(*) FROM singer WHERE singer_id > ${i % 5} AND ${i} = ${i}`),
          new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`quick query ${i} still waiting after ${RUNAWAY_TIMEOUT_MS / 2} ms`)), RUNAWAY_TIMEOUT_MS / 2)),
        ]);
        expect(result.rows).toEqual([[5 - (i % 5)]]);
      }
      expect(settled).toEqual([]);
      expect(executor.stats().timeouts).toBe(0);
      expect(pending).toHaveLength(runaways);
    } finally {
      await executor.close();
    }
  }, RUNAWAY_TIMEOUT_MS);
});

describe('a runaway that waited for a child', () => {
  it('says how long it waited and how long it ran, not that it ran for the whole wait', async () => {
    // One child, no spare and no stand-in for a stuck child: the second runaway has to wait for the first.
    const executor = new SqlExecutor({ poolSize: 1, spareChildren: 0, maxStuckChildren: 0, inProcessMaxMs: 0 });
    try {
      await executor.whenReady();
      const timeoutMs = 1_000;
      const errors = await Promise.all(
        [0, 1].map((i) => executor.query(fixture.dbPath, `${RUNAWAY_SQL} -- ${i}`, { timeoutMs }).then(() => undefined, (error: unknown) => error as AppError)),
      );
      const [first, second] = errors;
      expect(first?.code).toBe(ErrorCode.TIMEOUT);
      expect(second?.code).toBe(ErrorCode.TIMEOUT);
      expect(second?.details?.['waitedMs']).toBeGreaterThanOrEqual(timeoutMs);
      expect(second?.details?.['ranMs']).toBeGreaterThanOrEqual(timeoutMs);
      expect(second?.message).toMatch(/cut off after running \d+ ms \(its timeout is 1000 ms\), after waiting \d+ ms for an executor child/);
      // The first one started at once.
      expect(first?.details?.['waitedMs']).toBeLessThan(timeoutMs);
    } finally {
      await executor.close();
    }
  }, 60_000);
});
