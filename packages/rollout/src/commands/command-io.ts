import { parseArgs } from 'node:util';
import type { z } from 'zod';
import { AppError, ErrorCode, formatZodIssues, type Logger } from '@sqlenv/shared';

/**
 * What a rollout command may touch. Structurally compatible with the CLI's
 * CommandIo; apps add `env` (process.env — packages never read it) and a
 * `signal` aborted on SIGTERM/SIGINT.
 */
export interface RolloutCommandIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream & { isTTY?: boolean; columns?: number };
  env?: Record<string, string | undefined>;
  signal?: AbortSignal;
  /** Root logger (JSON lines); commands that print results on stdout need it on stderr. */
  logger?: Logger;
}

/** One command-line option and the environment variable that stands in for it (docker-compose sets those). */
export interface OptionSpec {
  /** Key in the parsed object. */
  key: string;
  env?: string;
  /** A flag without a value (`--json`). */
  flag?: boolean;
}

/**
 * Read `--kebab-case value` options, falling back to environment variables,
 * and validate the result with a zod schema (which holds the defaults). The
 * command line wins over the environment.
 */
export function readOptions<S extends z.ZodType>(argv: readonly string[], env: Record<string, string | undefined>, specs: Record<string, OptionSpec>, schema: S): z.infer<S> {
  let values: Record<string, string | boolean | undefined>;
  try {
    const options = Object.fromEntries(Object.entries(specs).map(([name, spec]) => [name, { type: spec.flag ? ('boolean' as const) : ('string' as const) }]));
    values = parseArgs({ args: [...argv], options, allowPositionals: false, strict: true }).values as Record<string, string | boolean | undefined>;
  } catch (error) {
    throw new AppError(ErrorCode.VALIDATION, error instanceof Error ? error.message : String(error));
  }
  const raw: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(specs)) {
    const value = values[name] ?? (spec.env === undefined ? undefined : env[spec.env]);
    if (value !== undefined && value !== '') raw[spec.key] = value;
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) throw new AppError(ErrorCode.VALIDATION, `invalid options: ${formatZodIssues(parsed.error)}`);
  return parsed.data;
}

/** Turn an error into a one-line message on stderr and an exit code (2 = bad usage, 1 = failure). */
export function reportCommandError(io: RolloutCommandIo, command: string, error: unknown): number {
  const appError = error instanceof AppError ? error : undefined;
  io.stderr.write(`sqlenv ${command}: ${appError ? `${appError.code}: ${appError.message}` : error instanceof Error ? error.message : String(error)}\n`);
  return appError?.code === ErrorCode.VALIDATION ? 2 : 1;
}

/**
 * `--help` or `-h` among a command's arguments (before a `--` that ends the options): the command
 * prints its usage and exits 0 instead of parsing anything (apps' own entry points go through here;
 * `sqlenv` answers before it calls the command).
 */
export function wantsHelp(argv: readonly string[]): boolean {
  const end = argv.indexOf('--');
  return (end === -1 ? argv : argv.slice(0, end)).some((arg) => arg === '--help' || arg === '-h');
}

/** Print `usage` for `--help`; the exit code of a help request. */
export function printUsage(io: Pick<RolloutCommandIo, 'stdout'>, usage: string): number {
  io.stdout.write(`usage: ${usage}\n`);
  return 0;
}

/** Resolves when the signal aborts (never, without a signal). */
export function aborted(signal: AbortSignal | undefined): Promise<void> {
  if (!signal) return new Promise<void>(() => undefined);
  if (signal.aborted) return Promise.resolve();
  return new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}
