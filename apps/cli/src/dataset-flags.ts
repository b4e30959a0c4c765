import { z } from 'zod';
import { createSqlEnvRuntime, type Dataset, type SqlEnvRuntime, type SqlEnvRuntimeOptions } from '@sqlenv/sql-env';
import { silentLogger } from '@sqlenv/shared';
import { booleanText, type FlagSpec } from './flags.ts';
import type { CommandIo } from './io.ts';
import { cacheDir } from './paths.ts';

/**
 * `--skip-missing-dbs` of every command that loads a dataset, else SQLENV_SKIP_MISSING_DBS
 * (1/true/0/false), else false (flag specs and schema; parseFlags needs the command's `env`).
 */
export const datasetFlagOptions = { 'skip-missing-dbs': { type: 'boolean', env: 'SQLENV_SKIP_MISSING_DBS' } } satisfies Record<string, FlagSpec>;
export const DatasetFlags = z.object({ 'skip-missing-dbs': booleanText.optional() });

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
