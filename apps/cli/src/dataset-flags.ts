import { z } from 'zod';
import { createSqlEnvRuntime, type Dataset, type SqlEnvRuntime, type SqlEnvRuntimeOptions } from '@sqlenv/sql-env';
import { formatZodIssues, silentLogger } from '@sqlenv/shared';
import { UsageError } from './cli-error.ts';
import type { CommandIo } from './io.ts';
import { cacheDir } from './paths.ts';

/** `--skip-missing-dbs` of every command that loads a dataset (parseArgs options and schema). */
export const datasetFlagOptions = { 'skip-missing-dbs': { type: 'boolean' } } as const;
export const DatasetFlags = z.object({ 'skip-missing-dbs': z.boolean().optional() });

const SkipMissingEnvSchema = z.enum(['1', '0', 'true', 'false']).transform((v) => v === '1' || v === 'true');

/** The flag when given, else SQLENV_SKIP_MISSING_DBS (1/true/0/false), else false. */
export function skipMissingDbs(flag: boolean | undefined, env: NodeJS.ProcessEnv = process.env): boolean {
  if (flag !== undefined) return flag;
  const value = env['SQLENV_SKIP_MISSING_DBS'];
  if (value === undefined || value === '') return false;
  const parsed = SkipMissingEnvSchema.safeParse(value);
  if (!parsed.success) throw new UsageError(`SQLENV_SKIP_MISSING_DBS: ${formatZodIssues(parsed.error)}`);
  return parsed.data;
}

/**
 * The SQL runtime of a command, in the shared cache directory. A dataset with a missing or empty
 * database file is refused unless `--skip-missing-dbs`; then every skipped database is printed on
 * stderr, so a run on fewer questions than the dataset holds never looks like a full one.
 */
export async function openSqlRuntime(options: Omit<SqlEnvRuntimeOptions, 'cacheDir' | 'logger' | 'datasetLoad'>, skip: boolean, io: Pick<CommandIo, 'logger'> & Partial<Pick<CommandIo, 'stderr'>>): Promise<SqlEnvRuntime> {
  const runtime = await createSqlEnvRuntime({ ...options, cacheDir: cacheDir(), datasetLoad: { skipMissingDbs: skip }, logger: io.logger ?? silentLogger });
  // A library caller without stderr still has the loader's warning in its log.
  if (io.stderr !== undefined) printSkippedDatabases(runtime.dataset, io.stderr);
  return runtime;
}

export function printSkippedDatabases(dataset: Dataset, stderr: NodeJS.WritableStream): void {
  for (const skipped of dataset.skippedDatabases) {
    stderr.write(`skipped database ${skipped.db_id}: ${skipped.reason} (${skipped.questions} question${skipped.questions === 1 ? '' : 's'} left out)\n`);
  }
}
