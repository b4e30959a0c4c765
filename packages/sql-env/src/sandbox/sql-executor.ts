/**
 * SqlExecutor: runs untrusted read-only SQL in a pool of child processes and
 * cuts off any query at its timeout without stalling the others.
 *
 * Why child processes (and not worker threads or in-process calls):
 * better-sqlite3 is synchronous and exposes neither sqlite3_interrupt nor a
 * progress handler (this build even omits the progress callback), so once a
 * query is inside sqlite3_step nothing in JavaScript can stop it. A worker
 * thread does not help: Worker.terminate() only interrupts JavaScript, and a
 * thread stuck in native code never reaches a safe point. The only reliable
 * kill switch is SIGKILL on a process. So each child holds cached read-only
 * connections and a prepared-statement LRU (query-runner.ts); the parent
 * writes requests to it and kills it when a query overstays. A warm spare
 * child (already started, idle) takes the dead one's place at once, and a new
 * spare starts in the background: a cold start of node + tsx costs ~0.4 s of
 * CPU (1-2 s of wall time on a busy two-core machine). A watchdog thread in
 * each child kills it if the parent dies, even mid-query (executor-child.ts).
 *
 * Throughput: requests are pipelined (up to `pipelineDepth` per child, a FIFO
 * that the child runs one at a time), writes to a child are batched per tick,
 * and frames are newline-delimited JSON on the child's stdin/stdout (measured
 * about as fast as Node's built-in JSON IPC and twice as fast as the 'advanced'
 * (V8) serialisation for small results, and it lets us batch and watch
 * backpressure). Dispatch goes to the least-loaded child that is not stuck on a
 * slow query; the rest waits in one executor-wide queue.
 *
 * Deadlines: a query's clock starts when its child starts running it. The
 * child answers strictly in order and hands each response to the kernel
 * before starting the next request, so the parent dates the start of request
 * i+1 at the arrival of response i (or at dispatch, if the child was idle,
 * or at the child's ready message, if it was booting). That date is never
 * earlier than the true start, so a query always gets its full timeout; it is
 * later by at most the IPC latency. When the head request overstays, the
 * child is SIGKILLed, that request fails with TIMEOUT, and the requests queued
 * behind it (which had not started) go back to the front of the executor
 * queue and run on another or the fresh child: a timeout never fails anyone
 * else. A child that dies on its own (OOM, killed externally) fails only its
 * running request with EXECUTOR_CRASHED, and is replaced the same way.
 *
 * Slow queries: every SLOW_CHECK_MS while anything is in flight, the requests
 * pipelined behind a query older than SLOW_HEAD_MS are taken back
 * (reclaimQueued) even when no other event would trigger it; a child whose
 * slow query keeps burning CPU (LOW_PRIORITY_AFTER_CPU_MS) is reniced to the
 * lowest CPU priority (a runaway query burns a whole core until its timeout;
 * on a small machine that core is shared with the server and the other
 * children, and the quick queries should win it). When its query ends, the child gets
 * its normal priority back; where the process may not raise its priority
 * again (an unprivileged container without a nice ulimit), the child finishes
 * what it has and is replaced instead. A request taken back from a child is
 * cancelled there; in the rare case that the cancellation comes too late and
 * the copy starts and runs longer than GHOST_KILL_AFTER_MS, its child is
 * killed: the real copy runs elsewhere under its own deadline, and a runaway
 * must not hold two children for a whole timeout.
 *
 * Fast path: a statement that already ran to completion in a child within
 * `inProcessMaxMs` (and calls no random or clock function) then runs in this
 * process, on the same QueryRunner code, without the round trip; see
 * fast-path.ts for why that cannot run away.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { setPriority } from 'node:os';
import { AppError, ErrorCode, processCpuMs, silentLogger, toAppError, type Logger } from '@sqlenv/shared';
import { executorChildEntry } from './child-entry.ts';
import { ExecutorConfigSchema, type ExecutorConfig, type QueryLimits } from './executor-config.ts';
import { FastPathTable, isRepeatableSql } from './fast-path.ts';
import { NdjsonLines } from './ndjson-lines.ts';
import { QueryRunner, type QueryResult } from './query-runner.ts';

export interface QueryOptions {
  /** Cap on rows returned (default: config.maxRows). */
  maxRows?: number;
  /** Time limit in milliseconds from when the query starts running (default: config.timeoutMs). */
  timeoutMs?: number;
}

export interface ExecutorStats {
  /** Children started since construction, replacements included. */
  spawnedChildren: number;
  /** Queries cut off at their timeout (each one killed a child). */
  timeouts: number;
  /** Children that died on their own (crash, OOM, external kill). */
  crashes: number;
  /** Queries answered by a child (rows or an SQL error). */
  completed: number;
  /** Queries answered in this process by the fast path (rows or an SQL error). */
  inProcess: number;
  /** Fast-path statements sent back to the children after an unexpectedly slow or failed in-process run. */
  demoted: number;
  /** Queries waiting in the executor, not yet sent to a child. */
  waiting: number;
  /** Queries sent to children and not yet answered. */
  inFlight: number;
  /** Children running a query for longer than 50 ms (runaways look like this until their timeout). */
  stuck: number;
}

interface Job {
  id: number;
  /**
   * A copy left in a child's input after its request was re-dispatched
   * (reclaimQueued). The child is told to skip it, and answers "skipped"
   * when its turn comes; if the cancellation came too late the child runs it.
   * Either way it keeps its place and its deadline in `inFlight`, and its
   * answer goes nowhere.
   */
  ghost?: true;
  dbPath: string;
  sql: string;
  maxRows: number;
  timeoutMs: number;
  /** When query() was called (performance.now() ms): the time before it started is queueing, not running. */
  queuedAtMs: number;
  resolve: (result: QueryResult) => void;
  reject: (error: AppError) => void;
}

interface ChildSlot {
  proc: ChildProcess;
  pid: number;
  ready: boolean;
  dead: boolean;
  /** Sent and not yet answered, oldest first; [0] is running (once ready). Ghosts included. */
  inFlight: Job[];
  /** When inFlight[0] started running, by the reasoning in the header (performance.now() ms). */
  headStartedMs: number;
  timer: NodeJS.Timeout | undefined;
  timerDueMs: number;
  /** Frames waiting for the next batched write. */
  outbox: string[];
  /** Reniced to LOW_PRIORITY for a slow query (see the header). */
  lowPriority: boolean;
  /** The child's CPU time (ms) when its current slow head was first seen (onSlowTick); undefined until then. */
  slowHeadCpuMs: number | undefined;
  /**
   * Its running query is slow AND burning CPU (burnsCpu): a runaway, not a
   * query slowed down by a busy machine. Only such a child gets a stand-in
   * started for it (refill): wall time alone would start children exactly
   * when the machine has no CPU to spare for them.
   */
  burning: boolean;
  /** Could not get its normal priority back: takes no new requests, retired once idle. */
  recycle: boolean;
  lines: NdjsonLines;
  /** Resolves when the child is ready or dead, whichever comes first. */
  settled: Promise<void>;
  markSettled: () => void;
  closed: Promise<void>;
}

/** A child whose running query is older than this gets no new requests (see pickChild). */
const SLOW_HEAD_MS = 50;
/** How often slow queries are looked for while requests are in flight. */
const SLOW_CHECK_MS = 25;
/** A ghost (see Job) that runs longer than this gets its child killed (its cancellation came too late). */
const GHOST_KILL_AFTER_MS = 250;
/** A slow head that has used this much CPU since it was first seen slow gets its child reniced to LOW_PRIORITY. */
const LOW_PRIORITY_AFTER_CPU_MS = 25;
/** Where CPU time cannot be read: a child whose running query is older than this is reniced. */
const LOW_PRIORITY_AFTER_MS = 250;
/**
 * An in-process (fast-path) run slower than this (or than 4 × inProcessMaxMs)
 * sends its statement back to the children. Wall time, so generous: on a busy
 * machine a microsecond query can be preempted for a few milliseconds.
 */
const DEMOTE_AFTER_MS = 10;
/** The nice value of a child running a slow query (the lowest priority). */
const LOW_PRIORITY = 19;
/** How long idle stand-ins are kept as spares after the peak of stuck children that needed them (see liveTarget). */
const SPARE_HOLD_MS = 30_000;
const knownCodes = new Set<string>(Object.values(ErrorCode));

/**
 * TIMEOUT for a query that started running at `startedMs`: it says how long
 * it ran and, apart, how long it had waited for a child before that (behind
 * other runaways, say), so a query that mostly queued does not read as one
 * that ran for its whole latency.
 */
function timeoutError(job: Job, startedMs: number, nowMs: number): AppError {
  const ranMs = Math.round(nowMs - startedMs);
  const waitedMs = Math.max(0, Math.round(startedMs - job.queuedAtMs));
  const waited = waitedMs >= 1 ? `, after waiting ${waitedMs} ms for an executor child` : '';
  return new AppError(ErrorCode.TIMEOUT, `query cut off after running ${ranMs} ms (its timeout is ${job.timeoutMs} ms)${waited}`, { details: { timeoutMs: job.timeoutMs, ranMs, waitedMs } });
}

/** The job id of a request frame (`[id, dbPath, sql, maxRows]`). */
function frameJobId(frame: string): number {
  return Number(frame.slice(1, frame.indexOf(',')));
}

/** The copy of a re-dispatched request that stays in its first child's queue; its answer is dropped. */
function ghostOf(job: Job): Job {
  return { ...job, ghost: true, resolve: () => undefined, reject: () => undefined };
}

/** A promise with its resolve function (Promise.withResolvers needs Node 22). */
function signal(): { promise: Promise<void>; resolve: () => void } {
  let resolve: () => void = () => {};
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

export class SqlExecutor {
  readonly config: ExecutorConfig;
  private readonly logger: Logger;
  /** Children that take requests. */
  private readonly children: ChildSlot[] = [];
  /** Started children kept idle, to replace a killed one without a cold start. */
  private readonly spares: ChildSlot[] = [];
  private readonly waiting: Job[] = [];
  /** What each query run is held to: sent to every child, and used by the in-process runner. */
  private readonly limits: QueryLimits;
  private readonly childArg: string;
  private nextJobId = 1;
  private closing: Promise<void> | undefined;
  private startFailures = 0;
  private readonly counters = { spawnedChildren: 0, timeouts: 0, crashes: 0, completed: 0, inProcess: 0, demoted: 0 };
  private readonly fastPath: FastPathTable;
  /** The in-process runner of the fast path, opened on first use. */
  private localRunner: QueryRunner | undefined;
  /** Runs every SLOW_CHECK_MS while any child has requests in flight. */
  private slowTicker: NodeJS.Timeout | undefined;
  private readonly setPriority: (pid: number, nice: number) => void;
  /** False once raising a child's priority back has failed (unprivileged): children then start at normal priority. */
  private canRaisePriority = true;
  /** The most stuck children (covered by stand-ins) seen at once lately, and when (see lendSpares). */
  private stuckPeak = 0;
  private stuckPeakAtMs = -Infinity;
  private spareTrimTimer: NodeJS.Timeout | undefined;

  /**
   * `setPriority` replaces os.setPriority (for tests: an unprivileged process
   * cannot raise a priority again, and that path must be exercised too).
   */
  constructor(config: Partial<ExecutorConfig> & { logger?: Logger; setPriority?: (pid: number, nice: number) => void } = {}) {
    const { logger, setPriority: setPriorityOverride, ...rest } = config;
    this.setPriority = setPriorityOverride ?? setPriority;
    const parsed = ExecutorConfigSchema.safeParse(rest);
    if (!parsed.success) {
      throw new AppError(ErrorCode.VALIDATION, `invalid executor config: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
    }
    this.config = parsed.data;
    this.logger = (logger ?? silentLogger).child({ component: 'sql-executor' });
    const { maxSqlChars, maxCellChars, maxResultChars, statementCacheSize, maxOpenDatabases, sqliteHeapLimitBytes } = this.config;
    this.limits = { maxSqlChars, maxCellChars, maxResultChars, statementCacheSize, maxOpenDatabases, sqliteHeapLimitBytes };
    this.childArg = JSON.stringify(this.limits);
    this.fastPath = new FastPathTable(this.config.inProcessStatements);
    const entry = executorChildEntry();
    if (!entry.bundled) this.logger.warn({ reason: entry.fallbackReason }, 'executor children start through the TypeScript loader (slower): the bundle cannot be used');
    if (entry.rewritten === true) this.logger.warn({ module: entry.module.href }, 'the executor child bundle on disk had been modified; rewritten before use');
    this.refill();
  }

  /**
   * Run one read-only query. Rejects with AppError SQL_REJECTED (not a single
   * SELECT), SQL_ERROR (SQLite failed), NOT_FOUND (no such database file),
   * TIMEOUT, EXECUTOR_CRASHED, CAPACITY (queue full), VALIDATION (bad options)
   * or ABORTED (executor closed).
   */
  query(dbPath: string, sql: string, options: QueryOptions = {}): Promise<QueryResult> {
    if (this.closing !== undefined) return Promise.reject(new AppError(ErrorCode.ABORTED, 'the SQL executor is closed'));
    const maxRows = options.maxRows ?? this.config.maxRows;
    const timeoutMs = options.timeoutMs ?? this.config.timeoutMs;
    // Hand-checked rather than zod: this is the hot path and the shapes are tiny.
    if (typeof dbPath !== 'string' || dbPath.length === 0) return Promise.reject(new AppError(ErrorCode.VALIDATION, 'dbPath must be a non-empty string'));
    if (typeof sql !== 'string') return Promise.reject(new AppError(ErrorCode.VALIDATION, 'sql must be a string'));
    if (!Number.isInteger(maxRows) || maxRows < 0) return Promise.reject(new AppError(ErrorCode.VALIDATION, `maxRows must be a non-negative integer, got ${maxRows}`));
    if (!Number.isInteger(timeoutMs) || timeoutMs < 1) return Promise.reject(new AppError(ErrorCode.VALIDATION, `timeoutMs must be a positive integer, got ${timeoutMs}`));
    // Refused here too (the child checks again) so a huge text is never shipped.
    if (sql.length > this.config.maxSqlChars) {
      return Promise.reject(new AppError(ErrorCode.SQL_REJECTED, `SQL is too long (${sql.length} characters; the limit is ${this.config.maxSqlChars})`));
    }
    if (this.config.inProcessMaxMs > 0) {
      const proof = this.fastPath.lookup(dbPath, sql, maxRows);
      if (proof !== undefined) return this.runInProcess(proof.complete, dbPath, sql, maxRows);
    }
    if (this.waiting.length >= this.config.maxQueuedRequests) {
      return Promise.reject(new AppError(ErrorCode.CAPACITY, `the SQL executor queue is full (${this.config.maxQueuedRequests} waiting queries)`));
    }
    return new Promise<QueryResult>((resolve, reject) => {
      this.waiting.push({ id: this.nextJobId++, dbPath, sql, maxRows, timeoutMs, queuedAtMs: performance.now(), resolve, reject });
      this.dispatch();
    });
  }

  /**
   * Resolves once every child that takes requests has started (to warm up
   * before timing-sensitive work; queries never need it), and with
   * `spares: true` the warm spares too. Rejects with ABORTED if the executor
   * closes first.
   */
  async whenReady(options: { spares?: boolean } = {}): Promise<void> {
    for (;;) {
      if (this.closing !== undefined) throw new AppError(ErrorCode.ABORTED, 'the SQL executor is closed');
      const starting = [...this.children, ...(options.spares === true ? this.spares : [])].filter((c) => !c.ready);
      if (starting.length === 0) return;
      await Promise.race(starting.map((c) => c.settled));
    }
  }

  /** Process ids of the live children (for tests and metrics). */
  childPids(): number[] {
    return this.children.filter((c) => !c.dead).map((c) => c.pid);
  }

  stats(): ExecutorStats {
    // Ghosts (left-behind copies, see Job) are not queries waiting for an answer: their real copy has one.
    const inFlight = this.children.reduce((n, c) => n + c.inFlight.filter((job) => job.ghost !== true).length, 0);
    return { ...this.counters, waiting: this.waiting.length, inFlight, stuck: this.slowChildCount(performance.now()) };
  }

  /** Stop every child; pending and later queries fail with ABORTED. Idempotent. */
  close(): Promise<void> {
    if (this.closing !== undefined) return this.closing;
    if (this.slowTicker !== undefined) clearInterval(this.slowTicker);
    this.slowTicker = undefined;
    if (this.spareTrimTimer !== undefined) clearTimeout(this.spareTrimTimer);
    this.localRunner?.close();
    this.localRunner = undefined;
    const aborted = (): AppError => new AppError(ErrorCode.ABORTED, 'the SQL executor was closed');
    for (const job of this.waiting.splice(0)) job.reject(aborted());
    const exits: Promise<void>[] = [];
    for (const child of [...this.children, ...this.spares]) {
      for (const job of child.inFlight.splice(0)) job.reject(aborted());
      this.retire(child);
      exits.push(child.closed);
    }
    this.closing = Promise.all(exits).then(() => undefined);
    return this.closing;
  }

  // ---- fast path ----------------------------------------------------------

  private runInProcess(complete: boolean, dbPath: string, sql: string, maxRows: number): Promise<QueryResult> {
    // One runner serves every proven statement of every database (each child
    // sees only a share), so it keeps more of them prepared.
    this.localRunner ??= new QueryRunner({ ...this.limits, statementCacheSize: 4 * this.limits.statementCacheSize });
    this.counters.inProcess += 1;
    // A first run here also opens the database and prepares the statement: not what was proven.
    const prepared = this.localRunner.isPrepared(dbPath, sql);
    try {
      const result = this.localRunner.run(dbPath, sql, maxRows, complete);
      if (prepared && result.elapsedMs > Math.max(DEMOTE_AFTER_MS, 4 * this.config.inProcessMaxMs)) this.demote(dbPath, sql, `took ${result.elapsedMs} ms in-process`);
      return Promise.resolve(result);
    } catch (error) {
      // It succeeded in a child; a failure now (a database file gone, ...) is
      // reported as is, and the statement goes back to being checked by a child.
      this.demote(dbPath, sql, 'failed in-process');
      return Promise.reject(toAppError(error, ErrorCode.SQL_ERROR));
    }
  }

  private demote(dbPath: string, sql: string, why: string): void {
    this.fastPath.demote(dbPath, sql);
    this.counters.demoted += 1;
    this.logger.warn({ why }, 'statement sent back from the in-process fast path to the executor children');
  }

  /** A child answered `job` with rows: a quick, repeatable statement qualifies for the fast path. */
  private maybeProve(job: Job, elapsedMs: number, truncated: boolean): void {
    if (this.config.inProcessMaxMs <= 0 || !(elapsedMs <= this.config.inProcessMaxMs)) return;
    if (this.fastPath.lookup(job.dbPath, job.sql, job.maxRows) !== undefined || !isRepeatableSql(job.sql)) return;
    this.fastPath.prove(job.dbPath, job.sql, { maxRows: job.maxRows, complete: !truncated });
  }

  // ---- dispatch -----------------------------------------------------------

  /** Move waiting jobs to children with room, best child first. */
  private dispatch(): void {
    this.reclaimQueued();
    while (this.waiting.length > 0) {
      const child = this.pickChild();
      if (child === undefined) return;
      this.send(child, this.waiting.shift() as Job);
    }
  }

  /**
   * Least-loaded child with room; a ready child beats a starting one. A child
   * whose current query has run longer than SLOW_HEAD_MS takes nothing new:
   * the request would only wait behind it (perhaps until its timeout), while
   * in the executor queue it goes to whichever child frees up first.
   */
  private pickChild(): ChildSlot | undefined {
    const nowMs = performance.now();
    let best: ChildSlot | undefined;
    let bestScore = Infinity;
    for (const child of this.children) {
      const load = child.inFlight.length;
      if (child.dead || child.recycle || load >= this.config.pipelineDepth) continue;
      if (child.ready && load > 0 && nowMs - child.headStartedMs > SLOW_HEAD_MS) continue;
      const score = load + (child.ready ? 0 : this.config.pipelineDepth);
      if (score < bestScore) {
        best = child;
        bestScore = score;
      }
    }
    return best;
  }

  /**
   * Requests pipelined behind a query that has run longer than SLOW_HEAD_MS
   * would wait for it — until its timeout when it is a runaway. Take them back
   * (they have not started: the child runs its input in order) and put them
   * at the front of the queue for another child. A request not yet written to
   * the child simply leaves its outbox; one already written is cancelled (the
   * child reads its input before each request and answers "skipped") and
   * stays in the child's `inFlight` as a ghost, so that the child's answers
   * still pair up in order and the copy keeps its deadline (a ghost that runs
   * anyway gets its child killed when it runs long, see onSlowTick).
   * Re-running a read is harmless.
   */
  private reclaimQueued(): void {
    const nowMs = performance.now();
    for (const child of this.children) {
      if (child.dead || !child.ready || child.inFlight.length < 2 || nowMs - child.headStartedMs <= SLOW_HEAD_MS) continue;
      const queued = child.inFlight.slice(1).filter((job) => job.ghost !== true);
      if (queued.length === 0) continue;
      const reclaimed = new Set(queued.map((job) => job.id));
      const unsent = new Set(child.outbox.map(frameJobId).filter((id) => reclaimed.has(id)));
      child.outbox = child.outbox.filter((frame) => !unsent.has(frameJobId(frame)));
      child.inFlight = child.inFlight.filter((job) => !unsent.has(job.id)).map((job) => (reclaimed.has(job.id) ? ghostOf(job) : job));
      for (const job of queued) if (!unsent.has(job.id)) this.enqueue(child, `${JSON.stringify(['cancel', job.id])}\n`, false);
      this.waiting.unshift(...queued);
    }
  }

  private send(child: ChildSlot, job: Job): void {
    const wasIdle = child.inFlight.length === 0;
    if (this.slowTicker === undefined) {
      this.slowTicker = setInterval(() => this.onSlowTick(), SLOW_CHECK_MS);
      this.slowTicker.unref();
    }
    child.inFlight.push(job);
    if (wasIdle && child.ready) this.headStarted(child, performance.now());
    this.enqueue(child, `${JSON.stringify([job.id, job.dbPath, job.sql, job.maxRows])}\n`, wasIdle);
  }

  /** Add a frame to the child's next batched write. */
  private enqueue(child: ChildSlot, frame: string, wasIdle: boolean): void {
    child.outbox.push(frame);
    if (child.outbox.length === 1) {
      // An idle child should start at once (latency); a busy one loses
      // nothing if we wait for the rest of this tick's requests (throughput).
      if (wasIdle) queueMicrotask(() => this.flush(child));
      else setImmediate(() => this.flush(child));
    }
  }

  private flush(child: ChildSlot): void {
    if (child.dead || child.outbox.length === 0) return;
    const data = child.outbox.length === 1 ? (child.outbox[0] as string) : child.outbox.join('');
    child.outbox = [];
    child.proc.stdin?.write(data);
  }

  // ---- slow queries ---------------------------------------------------------

  private onSlowTick(): void {
    const nowMs = performance.now();
    let busy = false;
    for (const child of [...this.children]) {
      if (child.dead || child.inFlight.length === 0) continue;
      busy = true;
      if (!child.ready) continue;
      const ageMs = nowMs - child.headStartedMs;
      if (child.inFlight[0]?.ghost === true && ageMs > GHOST_KILL_AFTER_MS) {
        this.logger.debug({ pid: child.pid }, 'a re-dispatched copy of a request runs long; killing its child');
        this.replace(child, undefined);
        continue;
      }
      if (!child.burning && ageMs > SLOW_HEAD_MS && this.burnsCpu(child, ageMs)) {
        child.burning = true;
        if (child.lowPriority) continue;
        try {
          this.setPriority(child.pid, LOW_PRIORITY);
          child.lowPriority = true;
        } catch (error) {
          this.logger.debug({ pid: child.pid, err: error }, 'could not lower the priority of a slow executor child');
        }
      }
    }
    this.lendSpares(nowMs);
    this.dispatch();
    if (!busy && this.slowTicker !== undefined) {
      clearInterval(this.slowTicker);
      this.slowTicker = undefined;
    }
  }

  /**
   * Whether a child's slow head is burning CPU rather than waiting for it: it
   * has used LOW_PRIORITY_AFTER_CPU_MS of CPU since it was first seen slow
   * (Linux /proc). A query that is merely slow because the machine is busy
   * keeps its priority (lowering it would starve it); a runaway does not.
   * Without /proc, the wall-clock age decides (LOW_PRIORITY_AFTER_MS).
   */
  private burnsCpu(child: ChildSlot, ageMs: number): boolean {
    const cpuMs = processCpuMs(child.pid);
    if (cpuMs === undefined) return ageMs > LOW_PRIORITY_AFTER_MS;
    child.slowHeadCpuMs ??= cpuMs;
    return cpuMs - child.slowHeadCpuMs >= LOW_PRIORITY_AFTER_CPU_MS;
  }

  /** The slow query of a reniced child has ended: normal priority again, or replace the child if that is not allowed. */
  private restorePriority(child: ChildSlot): void {
    child.lowPriority = false;
    try {
      this.setPriority(child.pid, 0);
    } catch (error) {
      this.canRaisePriority = false;
      if (!child.recycle) this.logger.info({ pid: child.pid, err: error }, 'cannot restore an executor child\'s priority; replacing it once idle (allow it with a nice ulimit of 20)');
      child.recycle = true;
    }
  }

  // ---- deadlines ----------------------------------------------------------

  private headStarted(child: ChildSlot, atMs: number): void {
    child.headStartedMs = atMs;
    child.slowHeadCpuMs = undefined;
    child.burning = false;
    const head = child.inFlight[0];
    if (head === undefined) return;
    const dueMs = atMs + head.timeoutMs;
    // One timer per child, moved only when a deadline comes earlier; a timer
    // that fires early just re-checks and re-arms (cheaper than re-arming per query).
    if (child.timer !== undefined && child.timerDueMs <= dueMs) return;
    this.armTimer(child, dueMs);
  }

  private armTimer(child: ChildSlot, dueMs: number): void {
    if (child.timer !== undefined) clearTimeout(child.timer);
    child.timerDueMs = dueMs;
    child.timer = setTimeout(() => this.onTimer(child), Math.max(0, dueMs - performance.now()));
    child.timer.unref();
  }

  private onTimer(child: ChildSlot): void {
    child.timer = undefined;
    const head = child.inFlight[0];
    if (child.dead || head === undefined || !child.ready) return;
    const dueMs = child.headStartedMs + head.timeoutMs;
    if (performance.now() < dueMs) {
      this.armTimer(child, dueMs);
      return;
    }
    // Timers run before I/O in the event loop: let pending responses be read
    // first, so a query that finished just in time is not blamed.
    setImmediate(() => {
      if (child.dead || child.inFlight[0] !== head) return;
      if (performance.now() < child.headStartedMs + head.timeoutMs) {
        this.armTimer(child, child.headStartedMs + head.timeoutMs);
        return;
      }
      this.counters.timeouts += 1;
      this.logger.info({ pid: child.pid, timeoutMs: head.timeoutMs, dbPath: head.dbPath }, 'query timed out; killing its executor child');
      this.replace(child, timeoutError(head, child.headStartedMs, performance.now()));
    });
  }

  // ---- children -----------------------------------------------------------

  /**
   * Bring the pool back to poolSize (promoting a spare, ready ones first),
   * then start spares until there are as many children as liveTarget says:
   * each stuck child gets a stand-in, lent from the spares (lendSpares), so
   * poolSize children keep taking requests while up to maxStuckChildren
   * runaways are being cut off.
   */
  private refill(): void {
    if (this.closing !== undefined) return;
    while (this.children.length < this.config.poolSize) {
      const spare = this.spares.find((c) => c.ready) ?? this.spares[0];
      if (spare === undefined) {
        this.spawn(this.children);
      } else {
        this.spares.splice(this.spares.indexOf(spare), 1);
        this.children.push(spare);
        if (spare.ready) this.logger.debug({ pid: spare.pid }, 'spare executor child promoted');
      }
    }
    const nowMs = performance.now();
    const stuck = this.coveredStuck(nowMs);
    // Plain spares start only once the working children are up: on two cores,
    // a third cold start would slow down the ones that matter. A stand-in for
    // a stuck child is needed now and starts at once, at normal priority.
    if (stuck === 0 && this.children.some((c) => !c.ready)) return;
    while (this.children.length + this.spares.length < this.liveTarget(nowMs)) this.spawn(this.spares, stuck > 0);
    if (this.spares.length > this.config.spareChildren) this.scheduleSpareTrim();
  }

  /**
   * Children to keep alive: the pool, a stand-in per stuck child, the spares,
   * and — for SPARE_HOLD_MS after a peak of stuck children — one more warm
   * spare per child stuck at that peak. Runaways come in waves (a client
   * whose query was cut off sends the next at once, and runaways sent
   * together are cut off together): the stuck children die at their
   * deadline, and the next wave must find warm stand-ins, not cold starts
   * (up to a second each on a busy machine, while quick queries wait). At
   * most poolSize + 2 × maxStuckChildren + spareChildren processes.
   */
  private liveTarget(nowMs: number): number {
    const held = nowMs - this.stuckPeakAtMs <= SPARE_HOLD_MS ? this.stuckPeak : 0;
    return this.config.poolSize + this.coveredStuck(nowMs) + held + this.config.spareChildren;
  }

  /** Children whose running query is older than SLOW_HEAD_MS (they take no new requests). */
  private slowChildCount(nowMs: number): number {
    let slow = 0;
    for (const child of this.children) if (!child.dead && child.ready && child.inFlight.length > 0 && nowMs - child.headStartedMs > SLOW_HEAD_MS) slow += 1;
    return slow;
  }

  /** Stuck children (slow and burning CPU) that get a stand-in: at most maxStuckChildren. */
  private coveredStuck(nowMs: number): number {
    let burning = 0;
    for (const child of this.children) if (child.burning && !child.dead && child.inFlight.length > 0 && nowMs - child.headStartedMs > SLOW_HEAD_MS) burning += 1;
    return Math.min(burning, this.config.maxStuckChildren);
  }

  /**
   * While children are stuck on slow queries, ready spares join the pool so
   * that poolSize children keep taking requests (a runaway would otherwise
   * take a child of the pool for its whole timeout). They go back to being
   * spares once idle and no longer needed (returnLentSpare). Also remembers
   * the most children stuck at once lately (stuckPeak), which sizes how many
   * idle stand-ins are kept warm for the next wave.
   */
  private lendSpares(nowMs: number): void {
    const stuck = this.coveredStuck(nowMs);
    if (stuck >= this.stuckPeak || nowMs - this.stuckPeakAtMs > SPARE_HOLD_MS) {
      this.stuckPeak = stuck;
      this.stuckPeakAtMs = nowMs;
    }
    const wanted = this.config.poolSize + Math.min(this.slowChildCount(nowMs), this.config.maxStuckChildren);
    while (this.children.length < wanted) {
      const spare = this.spares.find((c) => c.ready);
      if (spare === undefined) break;
      this.spares.splice(this.spares.indexOf(spare), 1);
      this.children.push(spare);
      this.logger.debug({ pid: spare.pid }, 'spare executor child lent to the pool while another is stuck on a slow query');
    }
    this.refill();
  }

  /** An idle child beyond what the pool needs now goes back to the spares (or is retired when there are enough). */
  private returnLentSpare(child: ChildSlot): void {
    const nowMs = performance.now();
    if (child.inFlight.length > 0 || child.outbox.length > 0 || this.children.length <= this.config.poolSize + Math.min(this.slowChildCount(nowMs), this.config.maxStuckChildren)) return;
    this.children.splice(this.children.indexOf(child), 1);
    if (this.children.length + this.spares.length < this.liveTarget(nowMs)) {
      this.spares.push(child);
      if (this.spares.length > this.config.spareChildren) this.scheduleSpareTrim();
    } else {
      this.retire(child);
    }
  }

  /** Retire the extra spares once the stuck peak that justified them is SPARE_HOLD_MS old. */
  private scheduleSpareTrim(): void {
    if (this.spareTrimTimer !== undefined) return;
    this.spareTrimTimer = setTimeout(() => {
      this.spareTrimTimer = undefined;
      if (this.closing !== undefined) return;
      const surplus = this.children.length + this.spares.length - this.liveTarget(performance.now());
      for (const spare of this.spares.filter((c) => c.ready && c.inFlight.length === 0).slice(0, Math.max(0, surplus))) this.retire(spare);
      if (this.spares.length > this.config.spareChildren) this.scheduleSpareTrim();
    }, SPARE_HOLD_MS);
    this.spareTrimTimer.unref();
  }

  /** Start a child into `into`; a spare starts at the lowest priority unless `urgent` (a stand-in needed now). */
  private spawn(into: ChildSlot[], urgent = false): void {
    // Checked against its content hash before every start (child-entry.ts).
    const entry = executorChildEntry();
    if (entry.rewritten === true) this.logger.warn({ module: entry.module.href }, 'the executor child bundle on disk had been modified; rewritten before use');
    const proc = fork(entry.module, [this.childArg], {
      execArgv: [...entry.execArgv, `--max-old-space-size=${this.config.childMaxHeapMb}`],
      stdio: ['pipe', 'pipe', 'inherit', 'ipc'],
      serialization: 'json',
    });
    const settled = signal();
    const closed = signal();
    const child: ChildSlot = {
      proc, pid: proc.pid ?? -1, ready: false, dead: false, inFlight: [], headStartedMs: 0, timer: undefined, timerDueMs: Infinity,
      outbox: [], lowPriority: false, slowHeadCpuMs: undefined, burning: false, recycle: false, lines: new NdjsonLines(), settled: settled.promise, markSettled: settled.resolve, closed: closed.promise,
    };
    into.push(child);
    this.counters.spawnedChildren += 1;
    // A spare is not needed yet: it starts (~0.1 s of CPU) at the lowest
    // priority, so that a replacement after every runaway does not take CPU
    // from the work being served; it gets normal priority once ready.
    if (into === this.spares && !urgent && this.canRaisePriority && child.pid > 0) {
      try {
        this.setPriority(child.pid, LOW_PRIORITY);
        child.lowPriority = true;
      } catch {
        // Not allowed here: it starts at normal priority.
      }
    }
    proc.stdout?.setEncoding('utf8');
    proc.stdout?.on('data', (chunk: string) => child.lines.push(chunk, (line) => this.onFrame(child, line)));
    // EPIPE and resets after a kill are expected; the 'close' handler does the bookkeeping.
    proc.stdin?.on('error', () => {});
    proc.stdout?.on('error', () => {});
    proc.on('error', (error) => this.onDeath(child, error.message));
    proc.on('close', (code, signal) => {
      closed.resolve();
      this.onDeath(child, signal !== null ? `killed by ${signal}` : `exited with code ${String(code)}`);
    });
    this.logger.debug({ pid: child.pid }, 'executor child started');
  }

  private onFrame(child: ChildSlot, line: string): void {
    if (child.dead) return;
    let frame: unknown;
    try {
      frame = JSON.parse(line);
    } catch {
      frame = undefined;
    }
    if (!Array.isArray(frame) || typeof frame[0] !== 'number' || typeof frame[1] !== 'number') {
      this.replace(child, undefined, 'sent a malformed frame');
      return;
    }
    if (frame[1] === 2) {
      child.ready = true;
      child.markSettled();
      if (child.lowPriority) this.restorePriority(child);
      this.startFailures = 0;
      this.lendSpares(performance.now());
      if (child.inFlight.length > 0) this.headStarted(child, performance.now());
      this.dispatch();
      return;
    }
    const job = child.inFlight[0];
    if (job === undefined || job.id !== frame[0] || (frame[1] === 3 && job.ghost !== true)) {
      this.replace(child, undefined, 'answered out of order');
      return;
    }
    child.inFlight.shift();
    if (job.ghost !== true) this.counters.completed += 1;
    if (child.lowPriority) this.restorePriority(child);
    if (child.inFlight.length > 0) this.headStarted(child, performance.now());
    if (frame[1] === 3) {
      // A cancelled ghost, skipped by the child: nothing to deliver.
    } else if (frame[1] === 0) {
      this.maybeProve(job, frame[6], frame[4] === true);
      job.resolve({ columns: frame[2], rows: frame[3], truncated: frame[4], cellsTruncated: frame[5], elapsedMs: frame[6] });
    } else {
      const code = typeof frame[2] === 'string' && knownCodes.has(frame[2]) ? (frame[2] as ErrorCode) : ErrorCode.INTERNAL;
      job.reject(new AppError(code, String(frame[3])));
    }
    if (child.recycle && child.inFlight.length === 0) {
      this.replace(child, undefined);
      return;
    }
    this.dispatch();
    this.returnLentSpare(child);
  }

  /** A child died without being told to (crash, OOM, external kill, failed start). */
  private onDeath(child: ChildSlot, how: string): void {
    if (child.dead) return;
    if (!child.ready) {
      this.startFailures += 1;
      this.logger.error({ pid: child.pid, how, startFailures: this.startFailures }, 'executor child died while starting');
      if (this.startFailures >= this.config.maxStartFailures) {
        const nowMs = performance.now();
        const failure = (job: Job): AppError =>
          new AppError(ErrorCode.EXECUTOR_CRASHED, `SQL executor children fail to start (${how}); the query waited ${Math.round(nowMs - job.queuedAtMs)} ms and never ran`);
        this.retire(child);
        for (const job of [...child.inFlight.splice(0), ...this.waiting.splice(0)]) job.reject(failure(job));
        // Try again later rather than spinning on a start that keeps failing.
        setTimeout(() => this.refill(), 1_000).unref();
        return;
      }
      this.replace(child, undefined, how);
      return;
    }
    this.counters.crashes += 1;
    this.logger.warn({ pid: child.pid, how }, 'executor child died; replacing it');
    this.replace(child, new AppError(ErrorCode.EXECUTOR_CRASHED, `the SQL executor process running this query died (${how})`), how);
  }

  /**
   * Kill `child` and start its replacement. `headError`, if given, fails the
   * request it was running; the others go back to the front of the queue.
   */
  private replace(child: ChildSlot, headError: AppError | undefined, why?: string): void {
    if (why !== undefined && headError === undefined) this.logger.warn({ pid: child.pid, why }, 'replacing executor child');
    this.retire(child);
    const jobs = child.inFlight.splice(0);
    if (headError !== undefined) jobs.shift()?.reject(headError);
    // Ghosts were already re-dispatched (reclaimQueued): only real requests go back.
    this.waiting.unshift(...jobs.filter((job) => job.ghost !== true));
    this.refill();
    this.dispatch();
  }

  /** Mark dead, stop its timer, SIGKILL it and drop it from the pool. */
  private retire(child: ChildSlot): void {
    child.dead = true;
    child.markSettled();
    if (child.timer !== undefined) clearTimeout(child.timer);
    child.timer = undefined;
    child.outbox = [];
    if (child.proc.exitCode === null && child.proc.signalCode === null) child.proc.kill('SIGKILL');
    for (const list of [this.children, this.spares]) {
      const at = list.indexOf(child);
      if (at !== -1) list.splice(at, 1);
    }
  }
}
