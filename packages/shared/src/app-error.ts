/**
 * One error class for the whole project, with a closed set of stable codes.
 * Boundaries (WS/HTTP frames, BullMQ jobs, CLI exit codes) translate from
 * these codes once; everything inside throws `AppError` or lets
 * `toAppError` normalise what it caught.
 */
export const ErrorCode = {
  /** Input failed schema validation (zod). */
  VALIDATION: 'VALIDATION',
  /** A referenced entity (table, question, database, file) does not exist. */
  NOT_FOUND: 'NOT_FOUND',
  /** SQL the sandbox refuses to run (writes, PRAGMA, ATTACH, several statements...). */
  SQL_REJECTED: 'SQL_REJECTED',
  /** SQL that SQLite itself failed on (syntax error, no such column...). */
  SQL_ERROR: 'SQL_ERROR',
  /** An operation ran past its time limit and was cut off. */
  TIMEOUT: 'TIMEOUT',
  /** A dataset directory or file is missing or malformed. */
  DATASET: 'DATASET',
  /** The episode is finished or not started; the action cannot apply. */
  EPISODE_STATE: 'EPISODE_STATE',
  /** A capacity limit (sessions, queue, pool) was reached. */
  CAPACITY: 'CAPACITY',
  /** A worker thread / process / executor died. */
  EXECUTOR_CRASHED: 'EXECUTOR_CRASHED',
  /** A graph (ONNX) could not be built: shape/dtype mismatch, unknown op, missing rule. */
  GRAPH: 'GRAPH',
  /** ONNX Runtime failed to create a session or to run. */
  RUNTIME: 'RUNTIME',
  /** A model checkpoint or tokenizer is missing, malformed or unsupported. */
  MODEL: 'MODEL',
  /** A transport (Redis, WebSocket) failed. */
  TRANSPORT: 'TRANSPORT',
  /** The operation was cancelled (shutdown, abort signal). */
  ABORTED: 'ABORTED',
  /**
   * A directory or file that this process must trust (code it runs, data it
   * scores with) is owned by another user, writable by others, or a symlink.
   */
  UNSAFE_PATH: 'UNSAFE_PATH',
  /** Authentication failed. */
  UNAUTHORIZED: 'UNAUTHORIZED',
  /** Anything not covered above; normalised unknown errors land here. */
  INTERNAL: 'INTERNAL',
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

export interface AppErrorOptions {
  cause?: unknown;
  /** Structured details safe to show a client (validation issues, limits...). */
  details?: Record<string, unknown>;
}

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message: string, options: AppErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AppError';
    this.code = code;
    this.details = options.details;
  }

  toJSON(): { code: ErrorCode; message: string; details?: Record<string, unknown> } {
    return this.details === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, details: this.details };
  }
}

export function isAppError(value: unknown): value is AppError {
  return value instanceof AppError;
}

/** Normalise anything thrown into an AppError (unknowns become INTERNAL, keeping the cause). */
export function toAppError(value: unknown, fallbackCode: ErrorCode = ErrorCode.INTERNAL): AppError {
  if (value instanceof AppError) return value;
  if (value instanceof Error) return new AppError(fallbackCode, value.message, { cause: value });
  return new AppError(fallbackCode, typeof value === 'string' ? value : JSON.stringify(value) ?? String(value));
}
