/**
 * Entry of one executor child process (see sql-executor.ts for the design).
 *
 * Wire format, both directions: newline-delimited JSON arrays (JSON.stringify
 * never emits a raw newline, so '\n' is an unambiguous frame end).
 *   parent → child  [id, dbPath, sql, maxRows]                                      request
 *                   ["cancel", id]                                                  skip it if not started
 *   child → parent  [id, 0, columns, rows, truncated, cellsTruncated, elapsedMs]   success
 *                   [id, 1, code, message]                                          failure
 *                   [id, 3]                                                          skipped (cancelled)
 *                   [0, 2, pid]                                                      ready (once)
 * Requests run strictly one at a time, in arrival order, and every request is
 * answered in that order (a cancelled one with "skipped"). A response is
 * handed to the kernel before the next request starts (when the socket is
 * full we wait for its write callback): the parent infers "request i+1
 * started" from "response i arrived", and that inference must never make a
 * query look older than it is. Between two requests the child lets its event
 * loop read input, so a cancellation the parent sent while a slow query ran
 * is seen before the next request starts (the parent cancels the requests it
 * took back from behind a slow query and ran elsewhere).
 */
import { Worker } from 'node:worker_threads';
// The one module of @sqlenv/shared this process needs (the package's index also loads the logger).
import { ErrorCode, toAppError } from '@sqlenv/shared/app-error';
import type { QueryLimits } from './executor-config.ts';
import { NdjsonLines } from './ndjson-lines.ts';
import { QueryRunner } from './query-runner.ts';

type Request = [id: number, dbPath: string, sql: string, maxRows: number];

/** The limits come from the parent, which validated them (executor-config.ts); only their shape is checked here. */
function parseLimits(arg: string | undefined): QueryLimits {
  const parsed: unknown = JSON.parse(arg ?? 'null');
  const keys: (keyof QueryLimits)[] = ['maxSqlChars', 'maxCellChars', 'maxResultChars', 'statementCacheSize', 'maxOpenDatabases', 'sqliteHeapLimitBytes'];
  if (typeof parsed !== 'object' || parsed === null || !keys.every((k) => typeof (parsed as Record<string, unknown>)[k] === 'number')) {
    process.stderr.write('executor child: bad limits argument\n');
    process.exit(2);
  }
  return parsed as QueryLimits;
}

const limits = parseLimits(process.argv[2]);
const runner = new QueryRunner({ ...limits, applyHeapLimit: true });

/**
 * Orphan guard: if the parent dies (even by SIGKILL) while this process is
 * stuck in a runaway query, the main thread never sees stdin close. A tiny
 * watchdog thread notices the re-parenting and kills this process.
 */
const watchdog = new Worker(
  `const { workerData: parentPid } = require('node:worker_threads');
   const check = () => { if (process.ppid !== parentPid) process.kill(process.pid, 'SIGKILL'); };
   check();
   setInterval(check, 250);`,
  // The parent's pid is read here, not in the thread: the thread may start
  // after the parent has already died.
  { eval: true, workerData: process.ppid },
);
watchdog.unref();

const queue: Request[] = [];
let waitingForDrain = false;

function isCancel(value: unknown): value is ['cancel', number] {
  return Array.isArray(value) && value.length === 2 && value[0] === 'cancel' && typeof value[1] === 'number';
}

function isRequest(value: unknown): value is Request {
  return Array.isArray(value) && value.length === 4 && typeof value[0] === 'number' && typeof value[1] === 'string' && typeof value[2] === 'string' && typeof value[3] === 'number';
}

/**
 * Called once each frame has been handed to the kernel. Resuming here, not on
 * 'drain': a stream emits 'drain' only after a write() that returned false
 * (its buffer past the high-water mark), so a small answer left in user space
 * by a full socket would otherwise stop this child for good.
 */
function onWritten(): void {
  if (waitingForDrain && process.stdout.writableLength === 0) {
    waitingForDrain = false;
    pump();
  }
}

function respond(frame: unknown[]): void {
  process.stdout.write(`${JSON.stringify(frame)}\n`, onWritten);
  // writableLength > 0: part of the frame is still in user space; do not start the next query.
  if (process.stdout.writableLength > 0) waitingForDrain = true;
}

function execute([id, dbPath, sql, maxRows]: Request): void {
  try {
    const result = runner.run(dbPath, sql, maxRows);
    respond([id, 0, result.columns, result.rows, result.truncated, result.cellsTruncated, result.elapsedMs]);
  } catch (error) {
    const appError = toAppError(error, ErrorCode.SQL_ERROR);
    respond([id, 1, appError.code, appError.message]);
  }
}

/** Ids of queued requests the parent cancelled (answered "skipped" when their turn comes). */
const cancelled = new Set<number>();
/** A pass through the event loop is pending before the next request (see the header). */
let yielding = false;

function resume(): void {
  yielding = false;
  pump();
}

function pump(): void {
  while (!waitingForDrain && !yielding) {
    const request = queue.shift();
    if (request === undefined) return;
    if (cancelled.delete(request[0])) {
      respond([request[0], 3]);
      continue;
    }
    execute(request);
    if (queue.length > 0) {
      // Two hops: the first immediate runs in this loop turn's check phase,
      // the second after the next turn's poll phase has read any input.
      yielding = true;
      setImmediate(() => setImmediate(resume));
    }
  }
}

const lines = new NdjsonLines();
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk: string) => {
  lines.push(chunk, (line) => {
    const parsed: unknown = JSON.parse(line);
    if (isCancel(parsed)) {
      // Too late (already answered) is fine: the parent then gets the real answer.
      if (queue.some((request) => request[0] === parsed[1])) cancelled.add(parsed[1]);
      return;
    }
    // A malformed frame means the peer is not our parent: stop rather than guess.
    if (!isRequest(parsed)) process.exit(2);
    queue.push(parsed);
  });
  pump();
});

function shutdown(): void {
  runner.close();
  process.exit(0);
}
process.stdin.on('end', shutdown);
process.on('disconnect', shutdown);

respond([0, 2, process.pid]);
