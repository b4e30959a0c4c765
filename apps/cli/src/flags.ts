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
export function parseFlags<S extends z.ZodType>(argv: readonly string[], specs: Record<string, FlagSpec>, schema: S, options: ParseFlagsOptions = {}): { flags: z.infer<S>; positionals: string[]; given: string[] } {
  const { command = '', positionals = 0, env = {} } = options;
  const label = command.includes(' ') ? `${command.slice(command.indexOf(' ') + 1)}: ` : '';
  let parsed: { values: Record<string, string | boolean | undefined>; positionals: string[] };
  try {
    const parseOptions = Object.fromEntries(Object.entries(specs).map(([name, spec]) => [name, { type: spec.type ?? ('string' as const), ...(spec.short === undefined ? {} : { short: spec.short }) }]));
    parsed = parseArgs({ args: joinNegativeValues(argv, specs), options: parseOptions, strict: true, allowPositionals: positionals > 0 }) as typeof parsed;
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
    throw new UsageError(`${label}${formatFlagIssues(result.error, specs, raw, schema)}${variables.length > 0 ? ` (from ${variables.join(', ')})` : ''}`);
  }
  return { flags: result.data, positionals: parsed.positionals, given: Object.keys(raw) };
}

/** A token that is a negative number (`-1`, `-0.5`, `-1e3`), never a flag: no flag name starts with a digit or a dot. */
const NEGATIVE_NUMBER = /^-(\d|\.\d)/;

/**
 * `--concurrency -1` as `--concurrency=-1`: node's parseArgs takes a value that starts with `-` for
 * an option of its own and calls the flag ambiguous; the value is the flag's, and the schema then
 * says what is wrong with it. Only before a `--` that ends the options.
 */
function joinNegativeValues(argv: readonly string[], specs: Record<string, FlagSpec>): string[] {
  const takesValue = new Set(Object.entries(specs).flatMap(([name, spec]) => ((spec.type ?? 'string') === 'string' ? [`--${name}`, ...(spec.short === undefined ? [] : [`-${spec.short}`])] : [])));
  const out: string[] = [];
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i] as string;
    const next = argv[i + 1];
    if (arg === '--') return [...out, ...argv.slice(i)];
    if (takesValue.has(arg) && next !== undefined && NEGATIVE_NUMBER.test(next)) {
      out.push(arg.startsWith('--') ? `${arg}=${next}` : `${arg}${next}`);
      i += 1;
    } else out.push(arg);
  }
  return out;
}

/** The flag (`--name`) whose parsed key is `key`. */
function flagOfKey(key: string, specs: Record<string, FlagSpec>): string {
  return `--${Object.entries(specs).find(([name, spec]) => (spec.key ?? name) === key)?.[0] ?? key}`;
}

/** Whether a flag's schema (under defaults, optionals and unions) takes integers only: its exclusive bounds are then said as inclusive ones. */
function isIntegerField(schema: z.ZodType | undefined): boolean {
  if (schema instanceof z.ZodDefault || schema instanceof z.ZodOptional || schema instanceof z.ZodPrefault) return isIntegerField(schema.unwrap() as z.ZodType);
  if (schema instanceof z.ZodUnion) return (schema.options as z.ZodType[]).some((option) => isIntegerField(option));
  return schema instanceof z.ZodNumber && schema.isInt;
}

/**
 * The schema's complaints in the flags' own words: a number out of its bounds as "--concurrency must
 * be ≥ 1, got -1" (a bound's own message after a colon), anything else as `key: message`.
 */
function formatFlagIssues(error: z.ZodError, specs: Record<string, FlagSpec>, raw: Record<string, unknown>, schema: z.ZodType): string {
  const shape = schema instanceof z.ZodObject ? (schema.shape as Record<string, z.ZodType>) : {};
  return error.issues
    .map((issue) => {
      const key = String(issue.path[0] ?? '');
      if (issue.path.length !== 1 || (issue.code !== 'too_small' && issue.code !== 'too_big') || issue.origin !== 'number') return formatZodIssues(new z.ZodError([issue]));
      const bound = Number(issue.code === 'too_small' ? issue.minimum : issue.maximum);
      const exclusive = !issue.inclusive;
      const integer = isIntegerField(shape[key]);
      const shown = exclusive && integer ? bound + (issue.code === 'too_small' ? 1 : -1) : bound;
      const relation = issue.code === 'too_small' ? (exclusive && !integer ? '>' : '≥') : exclusive && !integer ? '<' : '≤';
      const own = issue.message.startsWith('Too ') ? '' : `: ${issue.message}`;
      return `${flagOfKey(key, specs)} must be ${relation} ${shown.toLocaleString('en-US')}, got ${String(raw[key])}${own}`;
    })
    .join('; ');
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

/**
 * Most episodes one command plays (`--episodes`, and `--episodes` × `--seeds` of eval): far above any
 * evaluation or run, and below what the per-episode records of one process can hold.
 */
export const MAX_EPISODES = 1_000_000;
/** Most samples per question (`eval --seeds`): pass@k is read at k ≤ 100; more is a typo. */
export const MAX_SEEDS = 10_000;

/** `--episodes N|all` */
export const episodesFlag = z.union([z.literal('all'), z.coerce.number().int().positive().max(MAX_EPISODES, 'a bound no run needs: split larger work into several commands')]);
/** `--seeds K` of eval. */
export const seedsFlag = z.coerce.number().int().positive().max(MAX_SEEDS, 'a bound no evaluation needs (pass@k is read at k ≤ 100)');
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
