import { z } from 'zod';
import { checkDataset } from '@sqlenv/sql-env';
import { parseFlags } from '../args.ts';
import { UsageError } from '../cli-error.ts';
import type { CommandIo } from '../io.ts';

export const datasetsUsage = 'sqlenv datasets check <dir> [--json]';

/** `sqlenv datasets check <dir>`: validate a Spider-layout directory and report what is wrong. */
export async function datasetsCommand(argv: string[], io: CommandIo): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub !== 'check') throw new UsageError(`datasets: expected 'check', got '${sub ?? ''}'`);
  const { flags, positionals } = parseFlags('datasets check', rest, { json: { type: 'boolean' } }, z.object({ json: z.boolean().default(false) }), {
    positionals: 1,
  });
  const dir = positionals[0];
  if (dir === undefined) throw new UsageError('datasets check: missing <dir>');
  const report = await checkDataset(dir);
  if (flags.json) {
    io.stdout.write(`${JSON.stringify(report)}\n`);
  } else {
    io.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  }
  return report.ok ? 0 : 1;
}
