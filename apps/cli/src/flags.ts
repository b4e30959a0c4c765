import { parseArgs } from 'node:util';
import { z } from 'zod';
import { AppError, ErrorCode, formatZodIssues } from '@sqlenv/shared';
import { UsageError } from './cli-error.ts';

/**
 * One command-line flag: `--name value` (or `--name` alone for a boolean), the environment variable
 * that stands in for it (docker-compose sets those; the command line wins) and the key it gets in the
 * parsed object (the flag's own name by default).
 */
export interface FlagSpec {
  type?: 'string' | 'boolean';
  short?: string;
  env?: string;
  key?: string;
}

export interface ParseFlagsOptions {
  /** Named in messages when it is a sub-command ("model init"): the top-level name is printed by main(). */
  command?: string;
  /** Positional arguments allowed (0: a stray word is a usage error). */
  positionals?: number;
  /** Environment variables for the flags that name one (none read without it). */
  env?: Record<string, string | undefined>;
}

/**
 * The one flag parser of every command: flags strictly (an unknown flag or a stray positional is a
 * usage error), each missing one from its environment variable, then validated and coerced by a zod
 * schema (which holds the defaults). An empty value of a flag that has an environment variable
 * (`--x ''`, `X=`) counts as not given. Throws UsageError (exit 2) with the reason, naming the
 * environment variable a bad value came from.
 */
export function parseFlags<S extends z.ZodType>(argv: readonly string[], specs: Record<string, FlagSpec>, schema: S, options: ParseFlagsOptions = {}): { flags: z.infer<S>; positionals: string[] } {
  const { command = '', positionals = 0, env = {} } = options;
  const label = command.includes(' ') ? `${command.slice(command.indexOf(' ') + 1)}: ` : '';
  let parsed: { values: Record<string, string | boolean | undefined>; positionals: string[] };
  try {
    const parseOptions = Object.fromEntries(Object.entries(specs).map(([name, spec]) => [name, { type: spec.type ?? ('string' as const), ...(spec.short === undefined ? {} : { short: spec.short }) }]));
    parsed = parseArgs({ args: [...argv], options: parseOptions, strict: true, allowPositionals: positionals > 0 }) as typeof parsed;
  } catch (error) {
    throw new UsageError(`${label}${(error as Error).message.split('\n')[0] ?? 'bad arguments'}`);
  }
  if (parsed.positionals.length > positionals) throw new UsageError(`${label}unexpected argument '${parsed.positionals[positionals] ?? ''}'`);
  const raw: Record<string, unknown> = {};
  /** Keys whose value came from an environment variable, and that variable. */
  const fromEnv = new Map<string, string>();
  for (const [name, spec] of Object.entries(specs)) {
    const given = parsed.values[name];
    const value = given ?? (spec.env === undefined ? undefined : env[spec.env]);
    if (value === undefined || (value === '' && spec.env !== undefined)) continue;
    raw[spec.key ?? name] = value;
    if (given === undefined && spec.env !== undefined) fromEnv.set(spec.key ?? name, spec.env);
  }
  const result = schema.safeParse(raw);
  if (!result.success) {
    const variables = [...new Set(result.error.issues.map((issue) => fromEnv.get(String(issue.path[0]))).filter((v) => v !== undefined))];
    throw new UsageError(`${label}${formatZodIssues(result.error)}${variables.length > 0 ? ` (from ${variables.join(', ')})` : ''}`);
  }
  return { flags: result.data, positionals: parsed.positionals };
}

/**
 * `--help` or `-h` among a command's arguments (before a `--` that ends the options): the command
 * prints its usage and exits 0 instead of parsing anything (the apps' own entry points go through
 * here; `sqlenv` answers before it calls the command).
 */
export function wantsHelp(argv: readonly string[]): boolean {
  const end = argv.indexOf('--');
  return (end === -1 ? argv : argv.slice(0, end)).some((arg) => arg === '--help' || arg === '-h');
}

/** Print `usage` for `--help`; the exit code of a help request. */
export function printUsage(io: { stdout: NodeJS.WritableStream }, usage: string): number {
  io.stdout.write(`usage: ${usage}\n`);
  return 0;
}

/** `--episodes N|all` */
export const episodesFlag = z.union([z.literal('all'), z.coerce.number().int().positive()]);
/** A non-negative integer given as a string flag. */
export const intFlag = z.coerce.number().int().nonnegative();
export const positiveIntFlag = z.coerce.number().int().positive();
/** "true" / "false" / "1" / "0" from a flag or an environment variable (a boolean flag gives true). */
export const booleanText = z.union([z.boolean(), z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1')]);

/** A flag that takes a JSON object of settings (`--learner`, `--reward`): the object, or AppError VALIDATION naming the flag and an example. */
export function jsonObjectOption(text: string, flag: string, example: string): Record<string, unknown> {
  try {
    return z.record(z.string(), z.unknown()).parse(JSON.parse(text));
  } catch (cause) {
    throw new AppError(ErrorCode.VALIDATION, `${flag} must be a JSON object of ${flag.slice(2)} settings (e.g. ${example})`, { cause });
  }
}
