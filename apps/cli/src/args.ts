import { parseArgs, type ParseArgsConfig } from 'node:util';
import { z } from 'zod';
import { formatZodIssues } from '@sqlenv/shared';
import { UsageError } from './cli-error.ts';

type Options = NonNullable<ParseArgsConfig['options']>;

/**
 * Parse a command's flags strictly (unknown flags and stray positionals are
 * usage errors), then validate and coerce them with a zod schema so defaults
 * live in one place.
 */
export function parseFlags<S extends z.ZodType>(
  command: string,
  argv: string[],
  options: Options,
  schema: S,
  { positionals = 0 }: { positionals?: number } = {},
): { flags: z.infer<S>; positionals: string[] } {
  // main() already names the top-level command; only a sub-command ("model init") is named here.
  const label = command.includes(' ') ? `${command.slice(command.indexOf(' ') + 1)}: ` : '';
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args: argv, options, strict: true, allowPositionals: positionals > 0 });
  } catch (error) {
    throw new UsageError(`${label}${(error as Error).message.split('\n')[0] ?? 'bad arguments'}`);
  }
  if (parsed.positionals.length > positionals) {
    throw new UsageError(`${label}unexpected argument '${parsed.positionals[positionals] ?? ''}'`);
  }
  const result = schema.safeParse(parsed.values);
  if (!result.success) throw new UsageError(`${label}${formatZodIssues(result.error)}`);
  return { flags: result.data, positionals: parsed.positionals };
}

/** `--episodes N|all` */
export const episodesFlag = z.union([z.literal('all'), z.coerce.number().int().positive()]);
/** A non-negative integer given as a string flag. */
export const intFlag = z.coerce.number().int().nonnegative();
export const positiveIntFlag = z.coerce.number().int().positive();
