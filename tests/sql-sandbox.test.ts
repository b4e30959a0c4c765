/**
 * The SQL sandbox under attack, with real child processes: an adversarial
 * corpus against copies of real databases (a generated one, plus Spider's
 * activity_1 when SPIDER_DIR is set), runaway queries cut off while others
 * keep being served, pipelined requests surviving a timeout, an externally
 * killed child, and no byte written to any database file.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError, ErrorCode, processCpuMs } from '@sqlenv/shared';
import { SqlExecutor, type QueryResult } from '@sqlenv/sql-env';
import { executorChildEntry, makeTestDb } from '@sqlenv/sql-env/testing';

const TIMEOUT_MS = 300;
/** The bound the sandbox promises: refused, or cut off within its timeout plus this slack. */
const SLACK_MS = 1_000;
const FOREVER = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c)';

interface TestDb {
  label: string;
  path: string;
  /** A table with a handful of rows. */
  table: string;
}

const Expect = {
  /** AppError SQL_REJECTED. */
  REJECTED: 'rejected',
  /** Cut off (TIMEOUT) or refused by SQLite's own limits (SQL_ERROR: too big, out of memory). */
  STOPPED: 'stopped',
  /** Answered, with rows or cells capped. */
  CAPPED: 'capped',
} as const;
type Expect = (typeof Expect)[keyof typeof Expect];

function corpus(db: TestDb, dir: string): [string, Expect][] {
  const t = db.table;
  const selfJoin = (n: number): string => Array.from({ length: n }, (_, i) => `${t} t${i}`).join(', ');
  return [
    [`DROP TABLE ${t}`, Expect.REJECTED],
    [`DELETE FROM ${t}`, Expect.REJECTED],
    [`INSERT INTO ${t} DEFAULT VALUES`, Expect.REJECTED],
    [`UPDATE ${t} SET rowid = rowid + 1`, Expect.REJECTED],
    [`REPLACE INTO ${t} SELECT * FROM ${t}`, Expect.REJECTED],
    ['CREATE TABLE evil (a)', Expect.REJECTED],
    ['CREATE TEMP TABLE evil AS SELECT 1', Expect.REJECTED],
    [`ALTER TABLE ${t} RENAME TO gone`, Expect.REJECTED],
    [`CREATE TRIGGER tr AFTER INSERT ON ${t} BEGIN DELETE FROM ${t}; END`, Expect.REJECTED],
    [`ATTACH DATABASE '${join(dir, 'evil.sqlite')}' AS evil`, Expect.REJECTED],
    ['DETACH DATABASE main', Expect.REJECTED],
    ['PRAGMA writable_schema = ON', Expect.REJECTED],
    ['pRaGmA journal_mode = WAL', Expect.REJECTED],
    ["SELECT * FROM pragma_compile_options", Expect.REJECTED],
    ['VACUUM', Expect.REJECTED],
    [`VACUUM INTO '${join(dir, 'copy.sqlite')}'`, Expect.REJECTED],
    ['REINDEX', Expect.REJECTED],
    ['ANALYZE', Expect.REJECTED],
    ['BEGIN IMMEDIATE', Expect.REJECTED],
    ['COMMIT', Expect.REJECTED],
    ["SELECT load_extension('/tmp/evil.so')", Expect.REJECTED],
    ["SELECT [load_extension]('/tmp/evil.so', 'init')", Expect.REJECTED],
    [`SELECT 1; DROP TABLE ${t}`, Expect.REJECTED],
    [`SELECT 1; -- harmless?\nDELETE FROM ${t}`, Expect.REJECTED],
    [`SELECT 1 /* ; */ ; /* */ UPDATE ${t} SET rowid = 0`, Expect.REJECTED],
    [`WITH x AS (SELECT 1) DELETE FROM ${t}`, Expect.REJECTED],
    [`WITH x AS (SELECT 1) INSERT INTO ${t} SELECT * FROM ${t}`, Expect.REJECTED],
    [`SELECT 1\0; DROP TABLE ${t}`, Expect.REJECTED],
    [`SELECT '\0' FROM ${t}`, Expect.REJECTED],
    ['SELECT "\udc00"', Expect.REJECTED],
    ['', Expect.REJECTED],
    ['  \n ', Expect.REJECTED],
    [`SELECT count(*) FROM ${selfJoin(12)}`, Expect.STOPPED],
    [`${FOREVER} SELECT count(*) FROM c`, Expect.STOPPED],
    [`${FOREVER} SELECT x FROM c ORDER BY x DESC LIMIT 1`, Expect.STOPPED],
    [`SELECT group_concat(t0.rowid) FROM ${selfJoin(12)}`, Expect.STOPPED],
    ["SELECT printf('%.*c', 1000000000, 'x')", Expect.STOPPED],
    ["SELECT length(replace(printf('%.*c', 100000000, 'x'), 'x', 'yyy'))", Expect.STOPPED],
    ['SELECT randomblob(1000000000)', Expect.STOPPED],
    [`${FOREVER} SELECT x FROM c`, Expect.CAPPED],
    [`${FOREVER} SELECT printf('%.*c', 50000, 'x') FROM c`, Expect.CAPPED],
    ['SELECT zeroblob(5000000)', Expect.CAPPED],
    ["SELECT replace(zeroblob(1000000), x'00', 'abc') || printf('%.*c', 2000000, 'z')", Expect.CAPPED],
  ];
}

function sha256(path: string): string {
  return createHash('sha256').update(readFileSync(path)).digest('hex');
}

/** CPU time (user + system, ms) each process used over the next `windowMs` (Linux /proc). */
async function childCpuMsOver(pids: readonly number[], windowMs: number): Promise<number[]> {
  // A process that is gone is not busy.
  const read = (pid: number): number => processCpuMs(pid) ?? 0;
  const before = pids.map(read);
  await new Promise((resolve) => setTimeout(resolve, windowMs));
  return pids.map((pid, i) => read(pid) - (before[i] ?? 0));
}

async function outcome(promise: Promise<QueryResult>): Promise<{ result?: QueryResult; error?: AppError }> {
  try {
    return { result: await promise };
  } catch (error) {
    if (error instanceof AppError) return { error };
    throw error;
  }
}

let fixture: ReturnType<typeof makeTestDb>;
const dbs: TestDb[] = [];
const checksums = new Map<string, string>();
let listing: string[];

beforeAll(() => {
  fixture = makeTestDb('sql-sandbox-it-');
  dbs.push({ label: 'generated', path: fixture.dbPath, table: 'singer' });
  const spider = process.env.SPIDER_DIR;
  if (spider !== undefined && spider !== '') {
    const copy = join(fixture.dir, 'activity_1.sqlite');
    copyFileSync(join(spider, 'database', 'activity_1', 'activity_1.sqlite'), copy);
    dbs.push({ label: 'spider activity_1', path: copy, table: 'Student' });
  }
  for (const db of dbs) checksums.set(db.path, sha256(db.path));
  listing = readdirSync(fixture.dir).sort();
});

afterAll(() => fixture.cleanup());

describe('adversarial corpus', () => {
  let executor: SqlExecutor;
  beforeAll(async () => {
    executor = new SqlExecutor({ poolSize: 2, timeoutMs: TIMEOUT_MS, maxCellChars: 1_000, maxResultChars: 200_000, maxRows: 500 });
    await executor.whenReady();
  });
  afterAll(() => executor.close());

  it('refuses, cuts off or caps every case, each within timeout + 1 s', async () => {
    for (const [index, db] of dbs.entries()) {
      // Runaways that do not touch a table behave the same on every database: run them once.
      const cases = corpus(db, fixture.dir).filter(([sql, expected]) => index === 0 || expected !== Expect.STOPPED || sql.includes(db.table));
      for (const [sql, expected] of cases) {
        await executor.whenReady();
        // Only runaways get the short timeout: a refusal or a capped answer
        // must not turn into a TIMEOUT just because the machine is busy.
        const timeoutMs = expected === Expect.STOPPED ? TIMEOUT_MS : 10 * TIMEOUT_MS;
        const startedMs = performance.now();
        const { result, error } = await outcome(executor.query(db.path, sql, { timeoutMs }));
        const elapsedMs = performance.now() - startedMs;
        const label = `${db.label}: ${JSON.stringify(sql.slice(0, 80))}`;
        expect(elapsedMs, label).toBeLessThan(timeoutMs + SLACK_MS);
        if (expected === Expect.REJECTED) {
          expect(error?.code, label).toBe(ErrorCode.SQL_REJECTED);
          expect(error?.message, label).toMatch(/not allowed|empty SQL|NUL|Unicode/);
        } else if (expected === Expect.STOPPED) {
          expect([ErrorCode.TIMEOUT, ErrorCode.SQL_ERROR], `${label} → ${error?.message ?? 'answered'}`).toContain(error?.code);
        } else {
          expect(error, label).toBeUndefined();
          expect(result !== undefined && (result.truncated || result.cellsTruncated), label).toBe(true);
          expect(result?.rows.length, label).toBeLessThanOrEqual(500);
          for (const row of result?.rows ?? []) for (const cell of row) if (typeof cell === 'string') expect(cell.length, label).toBeLessThanOrEqual(1_001);
        }
      }
    }
    expect(executor.stats().timeouts).toBeGreaterThan(0);
  });

  it('keeps serving other queries while a runaway query runs', async () => {
    await executor.whenReady();
    const db = dbs[0] as TestDb;
    const order: string[] = [];
    const runaway = outcome(executor.query(db.path, `${FOREVER} SELECT count(*) FROM c`, { timeoutMs: 3_000 })).then((o) => {
      order.push('runaway');
      return o;
    });
    const fast = executor.query(db.path, 'SELECT name FROM singer ORDER BY singer_id LIMIT 2').then((r) => {
      order.push('fast');
      return r;
    });
    expect((await fast).rows).toEqual([['Joe Sharp'], ['Timbaland']]);
    // A second round while the runaway still holds its child.
    expect((await executor.query(db.path, 'SELECT count(*) FROM singer')).rows).toEqual([[5]]);
    expect(order).toEqual(['fast']);
    expect((await runaway).error?.code).toBe(ErrorCode.TIMEOUT);
    expect(order).toEqual(['fast', 'runaway']);
  });

  it('moves queries pipelined behind a runaway to another child instead of letting them wait for its timeout', async () => {
    await executor.whenReady();
    const db = dbs[0] as TestDb;
    let runawaySettled = false;
    // Same tick: least-loaded dispatch puts every other fast query behind the runaway.
    const runaway = outcome(executor.query(db.path, `${FOREVER} SELECT count(*) FROM c`, { timeoutMs: 4_000 })).then((o) => {
      runawaySettled = true;
      return o;
    });
    const fast = Array.from({ length: 8 }, (_, i) => executor.query(db.path, `SELECT ${i} AS n`).then((r) => ({ r, beforeRunaway: !runawaySettled })));
    const answers = await Promise.all(fast);
    expect(answers.map((a) => a.r.rows[0]?.[0])).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(answers.every((a) => a.beforeRunaway)).toBe(true);
    expect((await runaway).error?.code).toBe(ErrorCode.TIMEOUT);
    // The pool is whole again and answers normally.
    expect((await executor.query(db.path, 'SELECT count(*) FROM singer')).rows).toEqual([[5]]);
  });

  it('leaves no child running a re-dispatched runaway without a deadline', async () => {
    await executor.whenReady();
    const db = dbs[0] as TestDb;
    // Two slow-but-finishing heads, one per child; a runaway and a fast query
    // pipelined behind them. Once the heads are slow, the next dispatch takes
    // the runaway back and re-dispatches it while its copy stays in the first
    // child's input. That copy must keep a deadline: when the slow head
    // finishes, the child runs it and must be cut off, not left burning a core.
    const SLOW = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000000) SELECT count(*) FROM c';
    const slow = [0, 1].map(() => outcome(executor.query(db.path, SLOW, { timeoutMs: 30_000 })));
    const runaway = outcome(executor.query(db.path, `${FOREVER} SELECT count(*) FROM c`, { timeoutMs: 1_000 }));
    const fast = executor.query(db.path, 'SELECT 1');
    await new Promise((resolve) => setTimeout(resolve, 120));
    const trigger = executor.query(db.path, 'SELECT 2');
    for (const o of await Promise.all(slow)) expect(o.result?.rows).toEqual([[2000000]]);
    expect((await runaway).error?.code).toBe(ErrorCode.TIMEOUT);
    expect((await fast).rows).toEqual([[1]]);
    expect((await trigger).rows).toEqual([[2]]);
    // Ghost copies still queued in a child finish or hit their own deadline; then every child is idle.
    const idleBy = Date.now() + 15_000;
    for (;;) {
      const busyMs = await childCpuMsOver(executor.childPids(), 1_000);
      if (busyMs.every((ms) => ms < 300)) break;
      expect(Date.now(), `executor children still busy: ${busyMs.join(', ')} ms of CPU per second`).toBeLessThan(idleBy);
    }
    expect(executor.stats().waiting).toBe(0);
    expect((await executor.query(db.path, 'SELECT count(*) FROM singer')).rows).toEqual([[5]]);
  });

  it('round-trips non-ASCII text and refuses what SQLite would silently mangle', async () => {
    const db = dbs[0] as TestDb;
    const text = 'ÿþ – 😀 \u00a0 \\ " \n';
    expect((await executor.query(db.path, `SELECT '${text}'`)).rows).toEqual([[text]]);
    expect((await outcome(executor.query(db.path, "SELECT 'a\ud800b'"))).error?.code).toBe(ErrorCode.SQL_REJECTED);
    // Invalid UTF-8 stored in the database comes back with replacement characters.
    const [[mangled]] = (await executor.query(db.path, "SELECT CAST(x'41ff28c3' AS TEXT)")).rows as [[string]];
    expect(mangled.startsWith('A')).toBe(true);
    expect(mangled).toContain('\ufffd');
  });

  it('wrote nothing: same checksums, no journal, WAL or new files', () => {
    for (const [path, sum] of checksums) expect(sha256(path), path).toBe(sum);
    expect(readdirSync(fixture.dir).sort()).toEqual(listing);
    for (const db of dbs) {
      expect(existsSync(`${db.path}-journal`)).toBe(false);
      expect(existsSync(`${db.path}-wal`)).toBe(false);
    }
  });
});

describe('pipelining, timeouts and crashes (one child)', () => {
  let executor: SqlExecutor;
  beforeAll(async () => {
    executor = new SqlExecutor({ poolSize: 1, timeoutMs: TIMEOUT_MS, pipelineDepth: 8 });
    await executor.whenReady();
  });
  afterAll(() => executor.close());

  it('answers many pipelined queries in order, each with its own result', async () => {
    const db = fixture.dbPath;
    const results = await Promise.all(Array.from({ length: 200 }, (_, i) => executor.query(db, `SELECT ${i} AS n, name FROM singer WHERE singer_id = ${(i % 5) + 1}`)));
    results.forEach((r, i) => expect(r.rows[0]?.[0]).toBe(i));
  });

  it('re-dispatches the queries queued behind a timed-out one instead of failing them', async () => {
    const db = fixture.dbPath;
    const before = executor.childPids();
    const runaway = outcome(executor.query(db, `${FOREVER} SELECT count(*) FROM c`, { timeoutMs: 1_500 }));
    // Queued on the same child behind the runaway, so they wait longer than
    // their own timeouts; those only start when they start running, so they
    // must succeed (on the replacement child).
    const queued = Array.from({ length: 5 }, (_, i) => executor.query(db, `SELECT ${i}`, { timeoutMs: 1_000 }));
    expect((await runaway).error?.code).toBe(ErrorCode.TIMEOUT);
    expect((await Promise.all(queued)).map((r) => r.rows[0]?.[0])).toEqual([0, 1, 2, 3, 4]);
    expect(executor.childPids()).not.toEqual(before);
  });

  it('enforces the deadline of a request that starts after others in the pipeline, even a shorter one', async () => {
    const db = fixture.dbPath;
    await executor.whenReady();
    // One tick, one child: a fast head with a long timeout, then a runaway
    // with a short one, then another fast query.
    const first = executor.query(db, 'SELECT 1', { timeoutMs: 60_000 });
    const runaway = outcome(executor.query(db, `${FOREVER} SELECT count(*) FROM c`, { timeoutMs: TIMEOUT_MS }));
    const last = executor.query(db, 'SELECT 3', { timeoutMs: 60_000 });
    // Generous bound: only an executor that waited for the first request's
    // 60 s deadline (instead of the runaway's own) could lose this race.
    const winner = await Promise.race([runaway.then(() => 'runaway'), new Promise((resolve) => setTimeout(resolve, 20_000, 'slow'))]);
    expect(winner).toBe('runaway');
    expect((await runaway).error?.code).toBe(ErrorCode.TIMEOUT);
    expect((await first).rows).toEqual([[1]]);
    expect((await last).rows).toEqual([[3]]);
  });

  it('fails only the running query with EXECUTOR_CRASHED when its child is killed, then recovers', async () => {
    const db = fixture.dbPath;
    await executor.whenReady();
    const [pid] = executor.childPids();
    const running = outcome(executor.query(db, `${FOREVER} SELECT count(*) FROM c`, { timeoutMs: 60_000 }));
    const queued = executor.query(db, 'SELECT count(*) FROM singer', { timeoutMs: 60_000 });
    await new Promise((resolve) => setTimeout(resolve, 50));
    process.kill(pid as number, 'SIGKILL');
    const { error } = await running;
    expect(error?.code).toBe(ErrorCode.EXECUTOR_CRASHED);
    expect((await queued).rows).toEqual([[5]]);
    expect(executor.childPids()).toHaveLength(1);
    expect(executor.childPids()).not.toContain(pid);
    expect((await executor.query(db, 'SELECT max(age) FROM singer')).rows).toEqual([[52]]);
    expect(executor.stats().crashes).toBe(1);
  });

  it('replaces a child killed while idle without failing anything', async () => {
    await executor.whenReady();
    const [pid] = executor.childPids();
    process.kill(pid as number, 'SIGKILL');
    // A query sent before the executor notices the death would be "in flight"
    // on a dead child and fail with EXECUTOR_CRASHED; wait for the notice.
    while (executor.childPids().includes(pid as number)) await new Promise((resolve) => setTimeout(resolve, 20));
    expect((await executor.query(fixture.dbPath, 'SELECT 7')).rows).toEqual([[7]]);
    expect(executor.childPids()).toHaveLength(1);
  });

  it('reports NOT_FOUND for a missing database and SQL_ERROR with SQLite\'s message', async () => {
    expect((await outcome(executor.query(join(fixture.dir, 'missing.sqlite'), 'SELECT 1'))).error?.code).toBe(ErrorCode.NOT_FOUND);
    const { error } = await outcome(executor.query(fixture.dbPath, 'SELECT salary FROM singer'));
    expect(error?.code).toBe(ErrorCode.SQL_ERROR);
    expect(error?.message).toBe('no such column: salary');
  });
});

describe('backpressure (one child)', () => {
  it('keeps answering when its answers fill the pipe while the parent is busy', async () => {
    const executor = new SqlExecutor({ poolSize: 1, spareChildren: 0, timeoutMs: 3_000, pipelineDepth: 64 });
    try {
      await executor.whenReady();
      // 64 answers of ~8 KB in flight (more than the kernel buffers between
      // the processes hold) while this thread is blocked and reads nothing:
      // the child's stdout fills, an answer stays in its user-space buffer,
      // and the child must resume once that drains rather than wait for an
      // event that never comes.
      const queries = Array.from({ length: 256 }, (_, i) => executor.query(fixture.dbPath, `SELECT ${i}, hex(zeroblob(4000))`));
      await new Promise((resolve) => setImmediate(resolve));
      const until = performance.now() + 300;
      while (performance.now() < until) {
        // busy: the answers pile up in the pipe
      }
      const results = await Promise.all(queries.map(outcome));
      expect(results.map((r) => r.error?.code)).toEqual(results.map(() => undefined));
      expect(results.map((r) => r.result?.rows[0]?.[0])).toEqual(results.map((_, i) => i));
      expect(executor.stats().timeouts).toBe(0);
    } finally {
      await executor.close();
    }
  });
});

describe('in-process fast path', () => {
  // A generous bound so that a busy machine does not keep quick statements
  // from qualifying; what qualifies is the point here, not the threshold.
  const quick = { poolSize: 1, spareChildren: 0, timeoutMs: 2_000, inProcessMaxMs: 50 } as const;

  it('runs a statement a child proved quick in this process, with the same result', async () => {
    const executor = new SqlExecutor(quick);
    try {
      const sql = 'SELECT singer_id, name, photo FROM singer ORDER BY singer_id';
      const first = await executor.query(fixture.dbPath, sql);
      expect(executor.stats()).toMatchObject({ completed: 1, inProcess: 0 });
      const again = await executor.query(fixture.dbPath, sql);
      expect(executor.stats()).toMatchObject({ completed: 1, inProcess: 1 });
      expect({ ...again, elapsedMs: 0 }).toEqual({ ...first, elapsedMs: 0 });
      // A truncated result is reproduced too (row by row, as in the child) ...
      const capped = await executor.query(fixture.dbPath, sql, { maxRows: 2 });
      const cappedAgain = await executor.query(fixture.dbPath, sql, { maxRows: 2 });
      expect(capped.truncated).toBe(true);
      expect({ ...cappedAgain, elapsedMs: 0 }).toEqual({ ...capped, elapsedMs: 0 });
      // ... and the row cap is part of what was proven: another cap goes to a child first.
      expect(executor.stats()).toMatchObject({ completed: 2, inProcess: 2 });
    } finally {
      await executor.close();
    }
  });

  it('never runs a random, clock-dependent, failing or runaway statement in this process', async () => {
    const executor = new SqlExecutor(quick);
    try {
      for (let round = 0; round < 3; round += 1) {
        for (const sql of ['SELECT random()', "SELECT date('now')", 'SELECT CURRENT_TIMESTAMP', 'SELECT nope FROM singer']) {
          await outcome(executor.query(fixture.dbPath, sql));
        }
      }
      expect(executor.stats()).toMatchObject({ completed: 12, inProcess: 0 });
      for (let round = 0; round < 2; round += 1) {
        expect((await outcome(executor.query(fixture.dbPath, `${FOREVER} SELECT count(*) FROM c`, { timeoutMs: TIMEOUT_MS }))).error?.code).toBe(ErrorCode.TIMEOUT);
      }
      expect(executor.stats()).toMatchObject({ timeouts: 2, inProcess: 0 });
    } finally {
      await executor.close();
    }
  });

  it('sends a statement back to the children when it fails in this process', async () => {
    const executor = new SqlExecutor(quick);
    const copy = join(fixture.dir, 'fast-path-copy.sqlite');
    copyFileSync(fixture.dbPath, copy);
    try {
      const sql = 'SELECT count(*) FROM singer';
      expect((await executor.query(copy, sql)).rows).toEqual([[5]]);
      rmSync(copy);
      // Proven, so tried in this process, where the file is gone: reported, and demoted.
      expect((await outcome(executor.query(copy, sql))).error?.code).toBe(ErrorCode.NOT_FOUND);
      expect(executor.stats()).toMatchObject({ inProcess: 1, demoted: 1 });
      // The child still has the file open (read-only, unlinked): it answers, and proves it again.
      expect((await executor.query(copy, sql)).rows).toEqual([[5]]);
      expect(executor.stats()).toMatchObject({ completed: 2, inProcess: 1 });
    } finally {
      await executor.close();
    }
  });

  it('is off with inProcessMaxMs 0: every query goes to a child', async () => {
    const executor = new SqlExecutor({ ...quick, inProcessMaxMs: 0 });
    try {
      for (let i = 0; i < 3; i += 1) await executor.query(fixture.dbPath, 'SELECT count(*) FROM singer');
      expect(executor.stats()).toMatchObject({ completed: 3, inProcess: 0 });
    } finally {
      await executor.close();
    }
  });
});

describe('slow queries give up their CPU priority', () => {
  // Takes most of a second (3,000,000 rows of a recursive CTE), then answers.
  const SLOW = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000000) SELECT count(*) FROM c';

  it('renices a child whose query runs long, and restores it when the query ends', async () => {
    const calls: [number, number][] = [];
    // No stand-in for the stuck child (maxStuckChildren: 0): the same child must serve on, at its old priority.
    const executor = new SqlExecutor({
      poolSize: 1, spareChildren: 0, maxStuckChildren: 0, timeoutMs: 150_000, // far from the slow query's time, even on a loaded machine
      setPriority: (pid, nice) => {
        calls.push([pid, nice]);
        setPriority(pid, nice);
      },
    });
    try {
      await executor.whenReady();
      const [pid] = executor.childPids() as [number];
      const slow = executor.query(fixture.dbPath, SLOW);
      while (calls.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
      expect(getPriority(pid)).toBe(19);
      expect((await slow).rows).toEqual([[3_000_000]]);
      expect(calls).toEqual([[pid, 19], [pid, 0]]);
      expect(getPriority(pid)).toBe(0);
      expect(executor.childPids()).toEqual([pid]);
    } finally {
      await executor.close();
    }
  });

  it('cancels the left-behind copy of a taken-back runaway: it never runs, only its re-dispatched copy does', async () => {
    // No stand-ins for stuck children (maxStuckChildren: 0), so the children and their starts are counted exactly.
    // The slow heads take about a second on an idle core; a loaded machine may stretch that many
    // times, so their deadline is far away (the test is about the runaway's own 4 s deadline).
    const executor = new SqlExecutor({ poolSize: 2, spareChildren: 1, maxStuckChildren: 0, timeoutMs: 150_000 });
    try {
      await executor.whenReady();
      // One slow head per child (A longer than B), then a runaway pipelined
      // behind A's. Past SLOW_HEAD_MS it is taken back (and cancelled in A)
      // and runs on another child (B once free).
      const onA = executor.query(fixture.dbPath, SLOW);
      const onB = executor.query(fixture.dbPath, SLOW.replace('3000000', '1000000'));
      const [pidA] = executor.childPids() as [number];
      const spawned = executor.stats().spawnedChildren;
      const runaway = outcome(executor.query(fixture.dbPath, `${FOREVER} SELECT count(*) FROM c`, { timeoutMs: 4_000 }));
      expect((await onB).rows).toEqual([[1_000_000]]);
      expect((await onA).rows).toEqual([[3_000_000]]);
      // A skipped the copy: it stays alive and idle, and answers at once.
      const [cpuA] = await childCpuMsOver([pidA], 500);
      expect(cpuA).toBeLessThan(200);
      expect(executor.childPids()).toContain(pidA);
      expect((await executor.query(fixture.dbPath, 'SELECT 42')).rows).toEqual([[42]]);
      // The runaway itself is cut off once, on B, under its own deadline.
      expect((await runaway).error?.code).toBe(ErrorCode.TIMEOUT);
      expect(executor.stats()).toMatchObject({ timeouts: 1, crashes: 0, spawnedChildren: spawned + 1 });
    } finally {
      await executor.close();
    }
  }, 200_000);

  it('lends a ready spare to the pool while a child is stuck on a slow query', async () => {
    // One stand-in at most: on a loaded machine a quick query can run past the 50 ms that marks a child
    // as stuck, and with more allowed the pool would lend a further stand-in for it (a CI run saw 3 children).
    const executor = new SqlExecutor({ poolSize: 1, spareChildren: 1, maxStuckChildren: 1, timeoutMs: 20_000, inProcessMaxMs: 0 });
    try {
      await executor.whenReady({ spares: true });
      expect(executor.stats().spawnedChildren).toBe(2);
      let runawayDone = false;
      const runaway = outcome(executor.query(fixture.dbPath, `${FOREVER} SELECT count(*) FROM c`, { timeoutMs: 3_000 })).finally(() => (runawayDone = true));
      await new Promise((resolve) => setTimeout(resolve, 200));
      // With one pool child stuck, these would wait for its timeout; the lent spare answers them.
      const answers = await Promise.all([1, 2, 3].map((n) => executor.query(fixture.dbPath, `SELECT ${n}`)));
      expect(answers.map((r) => r.rows[0]?.[0])).toEqual([1, 2, 3]);
      expect(runawayDone).toBe(false);
      expect(executor.childPids()).toHaveLength(2);
      expect((await runaway).error?.code).toBe(ErrorCode.TIMEOUT);
      // The stuck child is gone; the lent one stays in the pool, and a new spare is started.
      expect(executor.childPids()).toHaveLength(1);
    } finally {
      await executor.close();
    }
  });

  it('replaces the child instead when its priority cannot be raised again (unprivileged)', async () => {
    // No stand-in for the stuck child (maxStuckChildren: 0): the same child must serve on, at its old priority.
    const executor = new SqlExecutor({
      poolSize: 1, spareChildren: 0, maxStuckChildren: 0, timeoutMs: 150_000, // far from the slow query's time, even on a loaded machine
      setPriority: (pid, nice) => {
        if (nice < 19) throw new Error('EACCES: permission denied');
        setPriority(pid, nice);
      },
    });
    try {
      await executor.whenReady();
      const [pid] = executor.childPids();
      const slow = executor.query(fixture.dbPath, SLOW);
      const behind = executor.query(fixture.dbPath, 'SELECT 1 + 1');
      expect((await slow).rows).toEqual([[3_000_000]]);
      expect((await behind).rows).toEqual([[2]]);
      await executor.whenReady();
      expect(executor.childPids()).not.toContain(pid);
      expect((await executor.query(fixture.dbPath, 'SELECT 3')).rows).toEqual([[3]]);
      expect(executor.stats()).toMatchObject({ crashes: 0, timeouts: 0 });
    } finally {
      await executor.close();
    }
  }, 200_000);
});

describe('mixed load with runaways and killed children (soak)', () => {
  // Bounded by work, not by time: a fixed, seeded mix of queries, and a child
  // killed after every KILL_EVERY answers. On a busy machine it takes longer
  // but does the same work, so every assertion holds whatever the load.
  const LANES = 48;
  const QUERIES_PER_LANE = 4;
  const KILL_EVERY = 20;

  it('answers every query correctly or with the error it earned, and leaves nothing behind', async () => {
    // Load-proof settings, each covered on its own elsewhere in this file:
    // - the fast path's bound is generous, so that a child proves the quick
    //   statements even when a busy machine preempts it mid-query (they take
    //   microseconds; the slow ones take milliseconds and stay in children);
    // - children are not really reniced (the executor's bookkeeping runs, the
    //   OS call does not): at nice 19 on a busy machine a slow query or a
    //   starting spare gets almost no CPU for a minute, and an honest slow
    //   answer turns into a TIMEOUT that only says the machine was busy;
    // - a slow query's deadline is far above its CPU need (under 0.1 s), for
    //   the same reason. Runaways keep their short TIMEOUT_MS.
    const executor = new SqlExecutor({ poolSize: 2, spareChildren: 1, timeoutMs: 60_000, inProcessMaxMs: 2, setPriority: () => undefined });
    const seen = new Set<number>();
    const unexpected: string[] = [];
    let kills = 0;
    let answered = 0;
    let runaways = 0;
    try {
      await executor.whenReady();
      let seed = 7;
      const random = (): number => {
        seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
        return seed / 2_147_483_648;
      };
      const killOne = (): void => {
        const pids = executor.childPids();
        const victim = pids[Math.floor(random() * pids.length)];
        if (victim === undefined) return;
        try {
          process.kill(victim, 'SIGKILL');
          kills += 1;
        } catch {
          // already gone
        }
      };
      const lane = async (): Promise<void> => {
        for (let q = 0; q < QUERIES_PER_LANE; q += 1) {
          for (const pid of executor.childPids()) seen.add(pid);
          const pick = random();
          const n = Math.floor(random() * 20);
          if (pick < 0.7) {
            const { result, error } = await outcome(executor.query(fixture.dbPath, `SELECT ${n}, count(*) FROM singer`));
            if (error?.code !== ErrorCode.EXECUTOR_CRASHED && JSON.stringify(result?.rows) !== JSON.stringify([[n, 5]])) unexpected.push(`quick ${n}: ${error?.code ?? JSON.stringify(result?.rows)}`);
          } else if (pick < 0.85) {
            const k = 50_000 + n * 7_000;
            const { result, error } = await outcome(executor.query(fixture.dbPath, `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ${k}) SELECT count(*) FROM c`));
            if (error?.code !== ErrorCode.EXECUTOR_CRASHED && result?.rows[0]?.[0] !== k) unexpected.push(`slow ${k}: ${error?.code ?? JSON.stringify(result?.rows)}`);
          } else if (pick < 0.9) {
            runaways += 1;
            const { error } = await outcome(executor.query(fixture.dbPath, `${FOREVER} SELECT count(*) FROM c WHERE x > ${n}`, { timeoutMs: TIMEOUT_MS }));
            if (error?.code !== ErrorCode.TIMEOUT && error?.code !== ErrorCode.EXECUTOR_CRASHED) unexpected.push(`runaway: ${error?.code ?? 'answered'}`);
          } else {
            const { error } = await outcome(executor.query(fixture.dbPath, `SELECT nope${n} FROM singer`));
            if (error?.code !== ErrorCode.SQL_ERROR && error?.code !== ErrorCode.EXECUTOR_CRASHED) unexpected.push(`bad column: ${error?.code ?? 'answered'}`);
          }
          answered += 1;
          if (answered % KILL_EVERY === 0) killOne();
        }
      };
      await Promise.all(Array.from({ length: LANES }, lane));
      expect(unexpected).toEqual([]);
      expect(answered).toBe(LANES * QUERIES_PER_LANE);
      expect(kills).toBeGreaterThan(0);
      // Cancelled copies of taken-back runaways may still be draining from their children.
      const deadline = performance.now() + 30_000;
      while (executor.stats().inFlight > 0 && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
      const stats = executor.stats();
      expect(stats).toMatchObject({ waiting: 0, inFlight: 0 });
      // The seeded mix holds runaways; each ends TIMEOUT unless a kill got its child first.
      expect(runaways).toBeGreaterThan(2);
      expect(stats.timeouts).toBeGreaterThan(0);
      expect(stats.inProcess).toBeGreaterThan(0);
      expect(stats.crashes).toBeLessThanOrEqual(kills);
      expect((await executor.query(fixture.dbPath, 'SELECT count(*) FROM singer')).rows).toEqual([[5]]);
    } finally {
      await executor.close();
    }
    // Every child this executor ever showed is gone. A child killed at nice 19
    // on a busy machine may need a moment of CPU to finish exiting: wait for it.
    expect(await stillAlive([...seen], 30_000)).toEqual([]);
    // Wall time grows with the machine's load (the work does not): a safety net only.
  }, 300_000);
});

describe('lifecycle', () => {
  it('close() is idempotent and aborts pending and later queries', async () => {
    const executor = new SqlExecutor({ poolSize: 2, timeoutMs: 10_000 });
    const pending = outcome(executor.query(fixture.dbPath, `${FOREVER} SELECT count(*) FROM c`));
    const pids = executor.childPids();
    const closing = executor.close();
    expect(executor.close()).toBe(closing);
    await closing;
    expect((await pending).error?.code).toBe(ErrorCode.ABORTED);
    expect((await outcome(executor.query(fixture.dbPath, 'SELECT 1'))).error?.code).toBe(ErrorCode.ABORTED);
    expect(executor.childPids()).toEqual([]);
    for (const pid of pids) expect(isAlive(pid), `child ${pid}`).toBe(false);
  });

  it('starts children with plain node on the bundled entry, not through the TypeScript loader', async () => {
    const executor = new SqlExecutor({ poolSize: 1, spareChildren: 0 });
    try {
      await executor.whenReady();
      const [pid] = executor.childPids();
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      expect(argv.some((arg) => arg.includes('tsx'))).toBe(false);
      expect(argv.some((arg) => /executor-child-[0-9a-f]+\.mjs$/.test(arg))).toBe(true);
      expect((await executor.query(fixture.dbPath, 'SELECT count(*) FROM singer')).rows).toEqual([[5]]);
    } finally {
      await executor.close();
    }
  });

  it('an executor child refuses a bad limits argument or a malformed frame: exit code 2, nothing run', async () => {
    const entry = executorChildEntry();
    const run = async (arg: string, input?: string): Promise<{ code: number | null; stdout: string; stderr: string }> => {
      const child = spawn(process.execPath, [...entry.execArgv, fileURLToPath(entry.module), arg], { stdio: ['pipe', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      if (input !== undefined) child.stdin.write(input);
      const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
      return { code, stdout, stderr };
    };
    const bad = await run('{}');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/bad limits argument/);
    expect(bad.stdout).toBe('');
    const limits = JSON.stringify({ maxSqlChars: 100, maxCellChars: 100, maxResultChars: 1_000, statementCacheSize: 4, maxOpenDatabases: 2, sqliteHeapLimitBytes: 0 });
    const malformed = await run(limits, `["not", "a", "request"]\n${JSON.stringify([1, fixture.dbPath, 'SELECT 1', 1])}\n`);
    expect(malformed.code).toBe(2);
    // Only the ready frame: the request after the malformed frame never ran.
    expect(malformed.stdout.trim().split('\n').map((line) => (JSON.parse(line) as unknown[])[1])).toEqual([2]);
  });

  it('rejects bad options with VALIDATION', async () => {
    expect(() => new SqlExecutor({ poolSize: 0 })).toThrow(/poolSize/);
    const executor = new SqlExecutor({ poolSize: 1 });
    try {
      expect((await outcome(executor.query(fixture.dbPath, 'SELECT 1', { timeoutMs: 0 }))).error?.code).toBe(ErrorCode.VALIDATION);
      expect((await outcome(executor.query(fixture.dbPath, 'SELECT 1', { maxRows: -1 }))).error?.code).toBe(ErrorCode.VALIDATION);
      expect((await outcome(executor.query('', 'SELECT 1'))).error?.code).toBe(ErrorCode.VALIDATION);
    } finally {
      await executor.close();
    }
  });

  it('a child whose parent is SIGKILLed mid-query does not outlive it', async () => {
    const { fork } = await import('node:child_process');
    const parent = fork(new URL('../packages/sql-env/src/sandbox/testing/orphan-parent.ts', import.meta.url), [fixture.dbPath], {
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    });
    const line = await new Promise<string>((resolve, reject) => {
      parent.stdout?.setEncoding('utf8').once('data', resolve);
      parent.once('exit', () => reject(new Error('orphan-parent exited early')));
    });
    const { pids } = JSON.parse(line) as { pids: number[] };
    // The pool's one child, and on a loaded machine possibly warm stand-ins for it too (the executor
    // starts them for a child whose query is stuck: at most poolSize + 2 × stuck children); every one
    // of them must die with the parent.
    expect(pids.length).toBeGreaterThanOrEqual(1);
    expect(pids.length).toBeLessThanOrEqual(3);
    parent.kill('SIGKILL');
    const deadlineMs = Date.now() + 20_000;
    while (pids.some(isAlive) && Date.now() < deadlineMs) await new Promise((resolve) => setTimeout(resolve, 100));
    expect(pids.filter(isAlive)).toEqual([]);
  });
});

/** Alive = exists and is not a zombie (a reaped-later corpse holds no resources). */
/** The processes of `pids` still alive once all are gone or `waitMs` has passed (polled). */
async function stillAlive(pids: readonly number[], waitMs: number): Promise<number[]> {
  const deadline = performance.now() + waitMs;
  for (;;) {
    const alive = pids.filter(isAlive);
    if (alive.length === 0 || performance.now() > deadline) return alive;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function isAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^\d+ \(.*\) [ZX] /.test(stat);
  } catch {
    return false;
  }
}
