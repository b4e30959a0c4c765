import { AppError, ErrorCode, type Logger } from '@sqlenv/shared';

/**
 * What a command may touch, injected so tests can capture it: output streams, and optionally stdin,
 * the environment variables (main passes process.env), a signal aborted on SIGTERM/SIGINT and a root
 * logger (JSON lines on stderr; stdout carries only results).
 */
export interface CommandIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream & { isTTY?: boolean; columns?: number };
  stdin?: NodeJS.ReadableStream;
  env?: Record<string, string | undefined>;
  signal?: AbortSignal;
  logger?: Logger;
}

/** Turn an error into a one-line message on stderr and an exit code (2 = bad usage, 1 = failure). */
export function reportCommandError(io: Pick<CommandIo, 'stderr'>, command: string, error: unknown): number {
  const appError = error instanceof AppError ? error : undefined;
  io.stderr.write(`sqlenv ${command}: ${appError ? `${appError.code}: ${appError.message}` : error instanceof Error ? error.message : String(error)}\n`);
  return appError?.code === ErrorCode.VALIDATION ? 2 : 1;
}

