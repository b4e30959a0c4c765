import { readdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import type { SplitName } from '@sqlenv/protocol';
import { isAppError, silentLogger, toAppError, type Logger } from '@sqlenv/shared';
import { readSchema, SqlExecutor } from '../sandbox/index.ts';
import { GoldFailureReason } from './dataset.ts';
import { loadDataset, type DatasetLoadConfig } from './load-dataset.ts';
import { DATABASE_DIR, dbIdProblem, isDirectory, isFile, questionFiles, readJsonFile, resolveDatabaseFile, SpiderExampleSchema, SpiderTablesEntrySchema, TABLES_FILE } from './spider-files.ts';

export const DatasetProblemKind = {
  MISSING_DIRECTORY: 'missing_directory',
  NO_QUESTION_FILE: 'no_question_file',
  BAD_FILE: 'bad_file',
  MISSING_DATABASE: 'missing_database',
  /** A db_id that is not a plain name, or a database file that resolves outside the dataset (symlinks followed): never opened. */
  UNSAFE_PATH: 'unsafe_path',
  UNREADABLE_DATABASE: 'unreadable_database',
  TABLES_JSON_MISMATCH: 'tables_json_mismatch',
  GOLD_FAILURE: 'gold_failure',
  EMPTY_GOLD: 'empty_gold',
  LOAD_FAILED: 'load_failed',
} as const;
export type DatasetProblemKind = (typeof DatasetProblemKind)[keyof typeof DatasetProblemKind];

export interface DatasetProblem {
  kind: DatasetProblemKind;
  /** error: the dataset (or this question) cannot be used as is; warning: worth knowing, nothing breaks. */
  severity: 'error' | 'warning';
  message: string;
  file?: string;
  question_id?: string;
  db_id?: string;
}

export interface DatasetCheckReport {
  dir: string;
  /** No problem of severity 'error'. */
  ok: boolean;
  questions: number;
  playable: number;
  databases: number;
  splits: SplitName[];
  problems: DatasetProblem[];
}

export interface CheckDatasetOptions extends Partial<Omit<DatasetLoadConfig, 'cacheDir'>> {
  /** Reused when given; otherwise a pool is started for the check and closed after. */
  executor?: SqlExecutor;
  cacheDir?: string;
  logger?: Logger;
}

/**
 * Inspect a Spider-layout directory and list everything wrong with it, without
 * stopping at the first problem (for `sqlenv datasets check`): missing or
 * unreadable database files, unknown db_ids, malformed JSON, tables.json
 * entries that disagree with the SQLite files, and gold queries that fail or
 * return nothing. Empty gold results are warnings (legitimate in Spider, but
 * such questions are not playable).
 */
export async function checkDataset(dir: string, options: CheckDatasetOptions = {}): Promise<DatasetCheckReport> {
  const absolute = resolve(dir);
  const report: DatasetCheckReport = { dir: absolute, ok: false, questions: 0, playable: 0, databases: 0, splits: [], problems: [] };
  const problem = (p: DatasetProblem): void => {
    report.problems.push(p);
  };

  if (!(await isDirectory(absolute))) {
    problem({ kind: DatasetProblemKind.MISSING_DIRECTORY, severity: 'error', message: `${absolute} is not a directory`, file: absolute });
    return report;
  }
  // Problems that make loading impossible; anything else still lets the gold queries be checked.
  let loadable = true;
  if (!(await isDirectory(join(absolute, DATABASE_DIR)))) {
    loadable = false;
    problem({ kind: DatasetProblemKind.MISSING_DIRECTORY, severity: 'error', message: 'missing the database/ folder', file: join(absolute, DATABASE_DIR) });
  }

  const referenced = new Set<string>();
  let anyQuestionFile = false;
  for (const { file } of questionFiles) {
    const path = join(absolute, file);
    if (!(await isFile(path))) continue;
    anyQuestionFile = true;
    try {
      const examples = await readJsonFile(path, z.array(SpiderExampleSchema));
      report.questions += examples.length;
      for (const example of examples) referenced.add(example.db_id);
    } catch (error) {
      loadable = false;
      problem({ kind: DatasetProblemKind.BAD_FILE, severity: 'error', message: toAppError(error).message, file: path });
    }
  }
  if (!anyQuestionFile) {
    loadable = false;
    problem({ kind: DatasetProblemKind.NO_QUESTION_FILE, severity: 'error', message: `no question file (expected one of ${questionFiles.map((q) => q.file).join(', ')})`, file: absolute });
  }

  const { tables: realTables, unsafe } = await checkDatabases(absolute, referenced, problem);
  report.databases = realTables.size;
  await checkTablesJson(absolute, realTables, problem);

  // A dataset that reaches outside itself is not loaded at all (the load would refuse it anyway).
  if (loadable && !unsafe) await checkGold(absolute, options, report);
  report.ok = !report.problems.some((p) => p.severity === 'error');
  return report;
}

/**
 * Each referenced db_id needs a plain name and a readable, non-empty SQLite file inside the dataset;
 * returns the table names of the readable ones (all present, referenced or not), and whether any
 * db_id or database directory reaches outside the dataset.
 */
async function checkDatabases(dir: string, referenced: ReadonlySet<string>, problem: (p: DatasetProblem) => void): Promise<{ tables: Map<string, string[]>; unsafe: boolean }> {
  const present = new Set<string>();
  try {
    // Symlinked directories count as present: one that points outside the dataset is reported.
    for (const entry of await readdir(join(dir, DATABASE_DIR), { withFileTypes: true })) if (entry.isDirectory() || entry.isSymbolicLink()) present.add(entry.name);
  } catch {
    // Reported above as a missing database/ folder.
  }
  const tables = new Map<string, string[]>();
  let unsafe = false;
  for (const dbId of new Set([...referenced, ...present])) {
    const file = await resolveDatabaseFile(dir, dbId);
    if (!file.ok) {
      if (file.kind === 'unsafe') {
        unsafe = true;
        problem({ kind: DatasetProblemKind.UNSAFE_PATH, severity: 'error', message: `refused, not opened: ${file.reason}`, file: file.path, db_id: dbId });
      } else if (referenced.has(dbId)) {
        problem({ kind: DatasetProblemKind.MISSING_DATABASE, severity: 'error', message: `questions refer to db_id '${dbId}' but ${file.reason}`, file: file.path, db_id: dbId });
      }
      continue;
    }
    try {
      tables.set(dbId, readSchema(file.path).map((t) => t.name));
    } catch (error) {
      problem({ kind: DatasetProblemKind.UNREADABLE_DATABASE, severity: 'error', message: `cannot read ${file.path}: ${toAppError(error).message}`, file: file.path, db_id: dbId });
    }
  }
  return { tables, unsafe };
}

/** tables.json (optional) must describe the same tables as the SQLite files (compared case-insensitively). */
async function checkTablesJson(dir: string, realTables: ReadonlyMap<string, string[]>, problem: (p: DatasetProblem) => void): Promise<void> {
  const path = join(dir, TABLES_FILE);
  if (!(await isFile(path))) return;
  let entries;
  try {
    entries = await readJsonFile(path, z.array(SpiderTablesEntrySchema));
  } catch (error) {
    problem({ kind: DatasetProblemKind.BAD_FILE, severity: 'error', message: toAppError(error).message, file: path });
    return;
  }
  for (const entry of entries) {
    const nameProblem = dbIdProblem(entry.db_id);
    if (nameProblem !== undefined) {
      problem({ kind: DatasetProblemKind.UNSAFE_PATH, severity: 'error', message: `tables.json entry db_id ${JSON.stringify(entry.db_id)} is not a plain name: ${nameProblem}`, file: path, db_id: entry.db_id });
      continue;
    }
    const real = realTables.get(entry.db_id);
    if (real === undefined) {
      problem({ kind: DatasetProblemKind.TABLES_JSON_MISMATCH, severity: 'warning', message: `tables.json describes db_id '${entry.db_id}', which has no readable database file`, file: path, db_id: entry.db_id });
      continue;
    }
    const realLower = new Set(real.map((t) => t.toLowerCase()));
    const listedLower = new Set(entry.table_names_original.map((t) => t.toLowerCase()));
    const missing = entry.table_names_original.filter((t) => !realLower.has(t.toLowerCase()));
    const extra = real.filter((t) => !listedLower.has(t.toLowerCase()));
    if (missing.length > 0 || extra.length > 0) {
      const parts = [missing.length > 0 ? `listed but not in the database: ${missing.join(', ')}` : '', extra.length > 0 ? `in the database but not listed: ${extra.join(', ')}` : ''];
      problem({ kind: DatasetProblemKind.TABLES_JSON_MISMATCH, severity: 'error', message: `tables.json entry '${entry.db_id}': ${parts.filter((p) => p !== '').join('; ')}`, file: path, db_id: entry.db_id });
    }
  }
}

/** Load the dataset for real (gold queries included) and report the questions it cannot play. */
async function checkGold(dir: string, options: CheckDatasetOptions, report: DatasetCheckReport): Promise<void> {
  const { executor: given, logger = silentLogger, ...loadOptions } = options;
  const executor = given ?? new SqlExecutor({ logger });
  try {
    // Missing and empty database files are reported above; the gold queries of the others are still checked.
    const dataset = await loadDataset(dir, { ...loadOptions, skipMissingDbs: true, executor, logger });
    report.playable = dataset.questions.length;
    report.splits = [...dataset.splits];
    // Missing database files were reported above, once per database rather than once per question.
    for (const failure of dataset.failures.filter((f) => f.reason !== GoldFailureReason.MISSING_DATABASE)) {
      report.problems.push({
        kind: DatasetProblemKind.GOLD_FAILURE,
        severity: 'error',
        message: `${failure.reason}: ${failure.message}`,
        question_id: failure.question_id,
        db_id: failure.database_name,
      });
    }
    for (const question of dataset.questions.filter((q) => q.gold_rows.length === 0)) {
      report.problems.push({
        kind: DatasetProblemKind.EMPTY_GOLD,
        severity: 'warning',
        message: 'gold SQL returns no rows: playable, the expected answer is "none"',
        question_id: question.question_id,
        db_id: question.database_name,
      });
    }
  } catch (error) {
    if (!isAppError(error)) throw error;
    report.problems.push({ kind: DatasetProblemKind.LOAD_FAILED, severity: 'error', message: error.message });
  } finally {
    if (given === undefined) await executor.close();
  }
}
