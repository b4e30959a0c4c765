import { availableParallelism } from 'node:os';
import { z } from 'zod';

/**
 * Limits that the child process applies while running one query. They are
 * fixed per executor (sent once when a child starts), unlike `maxRows` and
 * `timeoutMs`, which a caller may override per query.
 */
export const QueryLimitsSchema = z.strictObject({
  /** Longest SQL text accepted, in UTF-16 characters; longer is SQL_REJECTED. */
  maxSqlChars: z.int().min(1).default(100_000),
  /** Longest cell text returned, in characters; longer strings are cut and end with '…'. BLOBs become hex, cut to this many hex digits. */
  maxCellChars: z.int().min(16).default(10_000),
  /**
   * Budget for the whole result, in characters of cell text (numbers and NULLs
   * count a few characters each). Rows stop being fetched once it is spent and
   * the result is marked truncated. UTF-8 bytes on the wire are at most 3× this.
   */
  maxResultChars: z.int().min(1).default(1_000_000),
  /** Prepared statements kept per child process (LRU across all its databases). */
  statementCacheSize: z.int().min(0).default(512),
  /** Read-only connections kept open per child process (LRU by database path). */
  maxOpenDatabases: z.int().min(1).default(64),
  /**
   * SQLite's process-wide hard heap limit in each child, in bytes
   * (`PRAGMA hard_heap_limit`): a query that needs more (a giant printf, a
   * huge sort in memory) fails with SQL_ERROR instead of exhausting memory.
   * 0 disables the limit.
   */
  sqliteHeapLimitBytes: z.int().min(0).default(256 * 1024 * 1024),
});
export type QueryLimits = z.infer<typeof QueryLimitsSchema>;

export const ExecutorConfigSchema = QueryLimitsSchema.extend({
  /**
   * Child processes in the pool. At least 2 so that one runaway query never
   * stalls every other episode; default: the core count, between 2 and 4.
   */
  poolSize: z.int().min(1).max(64).default(() => Math.min(4, Math.max(2, availableParallelism()))),
  /**
   * Extra children started and kept idle: when a query times out (or a child
   * crashes) a ready spare takes over at once instead of a cold start
   * (~0.3-1 s for node + tsx), so the pool stays at full strength.
   */
  spareChildren: z.int().min(0).max(16).default(1),
  /**
   * Children stuck on slow queries (running for over 50 ms: a runaway looks
   * like this until its timeout) that the pool stands in for: each one gets
   * an extra child (a ready spare at once, and a new spare started behind
   * it), so that poolSize children keep taking new queries while up to this
   * many runaways are being cut off. Beyond it, new queries wait for a child
   * to free up. Each stand-in is a process (~40 MB); see docs/sandbox.md.
   * Default 8: at least the largest default pool.
   */
  maxStuckChildren: z.int().min(0).max(64).default(8),
  /** Default per-query time limit in milliseconds, counted from when the child starts running the query. */
  timeoutMs: z.int().min(1).max(3_600_000).default(5_000),
  /** Default cap on rows returned per query; the result is marked truncated past it. */
  maxRows: z.int().min(0).default(1_000),
  /**
   * Requests written ahead to one child before its earlier ones answer
   * (pipelining hides the IPC round trip). Deeper means more throughput but
   * more requests waiting behind a slow query on that child.
   */
  pipelineDepth: z.int().min(1).max(1_024).default(16),
  /** Requests waiting in the executor (not yet sent to a child) before query() fails with CAPACITY. */
  maxQueuedRequests: z.int().min(1).default(100_000),
  /** V8 old-space limit of each child, in MiB: a child that blows it dies and is replaced (EXECUTOR_CRASHED). */
  childMaxHeapMb: z.int().min(32).default(1_024),
  /**
   * In-process fast path (fast-path.ts): a statement whose identical text
   * (same database, same row cap) already ran to completion in a child within
   * this many milliseconds, and that calls no random or clock function, runs
   * in this process from then on — its work is a pure function of read-only
   * data, so it cannot run away, and the round trip to a child costs more
   * than the query. An in-process run slower than 10 ms (or 4× this) sends
   * the statement back to the children. 0 turns the fast path off.
   */
  inProcessMaxMs: z.number().min(0).max(100).default(0.25),
  /** Statements remembered as proven fast (oldest proof dropped first). */
  inProcessStatements: z.int().min(1).default(10_000),
  /** Children that die before becoming ready this many times in a row fail all waiting requests (EXECUTOR_CRASHED). */
  maxStartFailures: z.int().min(1).default(3),
});
export type ExecutorConfig = z.infer<typeof ExecutorConfigSchema>;
