import { readFile, realpath, stat } from 'node:fs/promises';
import { isAbsolute, join, relative, sep } from 'node:path';
import { z } from 'zod';
import { AppError, ErrorCode, formatZodIssues } from '@sqlenv/shared';
import type { SplitName } from '@sqlenv/protocol';

/**
 * The files of a Spider-layout directory:
 *   database/<db_id>/<db_id>.sqlite
 *   train_spider.json, train_others.json (split "train"), dev.json (split "dev")
 *   tables.json (optional schema metadata; only `checkDataset` reads it: the
 *   environment takes schemas from the SQLite files themselves)
 */
export const questionFiles: readonly { file: string; split: SplitName }[] = [
  { file: 'train_spider.json', split: 'train' },
  { file: 'train_others.json', split: 'train' },
  { file: 'dev.json', split: 'dev' },
];
export const TABLES_FILE = 'tables.json';
export const DATABASE_DIR = 'database';

export function databasePath(datasetDir: string, dbId: string): string {
  return join(datasetDir, DATABASE_DIR, dbId, `${dbId}.sqlite`);
}

/**
 * Why a db_id cannot name a database, or undefined for a plain name. A db_id becomes two path
 * segments (`database/<db_id>/<db_id>.sqlite`), so a separator or `..` in it would reach files
 * outside the dataset; NUL would be cut by the OS.
 */
export function dbIdProblem(dbId: string): string | undefined {
  if (dbId.includes('\0')) return 'it contains a NUL character';
  if (/[/\\]/.test(dbId)) return 'it contains a path separator';
  if (dbId.includes('..')) return "it contains '..'";
  if (dbId === '.') return "it is '.'";
  return undefined;
}

/** Where a db_id's SQLite file is, or why it cannot be opened. */
export type DatabaseFile =
  | { ok: true; dbId: string; path: string }
  | { ok: false; dbId: string; path: string; kind: 'unsafe' | 'missing' | 'empty'; reason: string };

/**
 * Resolve a db_id to its SQLite file inside the dataset directory. 'unsafe': the db_id is not a
 * plain name, or the file's real path (symlinks followed) lies outside the dataset directory's
 * real path; 'missing': no such file (or not a regular file); 'empty': a 0-byte file, which SQLite
 * would open as a database without tables. An ok result carries the real path: the file that was
 * checked is the file that is opened.
 */
export async function resolveDatabaseFile(datasetDir: string, dbId: string): Promise<DatabaseFile> {
  const path = databasePath(datasetDir, dbId);
  const problem = dbIdProblem(dbId);
  if (problem !== undefined) return { ok: false, dbId, path, kind: 'unsafe', reason: `db_id ${JSON.stringify(dbId)} is not a plain name: ${problem}` };
  let real: string;
  try {
    real = await realpath(path);
  } catch {
    return { ok: false, dbId, path, kind: 'missing', reason: `${path} does not exist` };
  }
  const root = await realpath(datasetDir);
  const inside = relative(root, real);
  if (inside === '' || inside === '..' || inside.startsWith(`..${sep}`) || isAbsolute(inside)) {
    return { ok: false, dbId, path, kind: 'unsafe', reason: `${path} resolves to ${real}, outside the dataset directory ${root} (a symlink?)` };
  }
  const info = await stat(real);
  if (!info.isFile()) return { ok: false, dbId, path, kind: 'missing', reason: `${path} is not a file` };
  if (info.size === 0) return { ok: false, dbId, path, kind: 'empty', reason: `${path} is empty (0 bytes)` };
  return { ok: true, dbId, path: real };
}

/** One Spider example. Real Spider files carry more fields (tokens, parsed SQL); they are ignored. */
export const SpiderExampleSchema = z.looseObject({
  db_id: z.string().min(1),
  question: z.string().min(1),
  query: z.string().min(1),
});
export type SpiderExample = z.infer<typeof SpiderExampleSchema>;

/** One tables.json entry; only the fields a consistency check needs. */
export const SpiderTablesEntrySchema = z.looseObject({
  db_id: z.string().min(1),
  table_names_original: z.array(z.string()),
});
export type SpiderTablesEntry = z.infer<typeof SpiderTablesEntrySchema>;

/** Parse a JSON file with a schema; any problem is AppError(DATASET) naming the file and what is wrong. */
export async function readJsonFile<S extends z.ZodType>(path: string, schema: S): Promise<z.infer<S>> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (cause) {
    throw new AppError(ErrorCode.DATASET, `${path}: cannot read file (${(cause as Error).message})`, { cause, details: { file: path } });
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (cause) {
    throw new AppError(ErrorCode.DATASET, `${path}: invalid JSON (${(cause as Error).message})`, { cause, details: { file: path } });
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    throw new AppError(ErrorCode.DATASET, `${path}: unexpected content: ${formatZodIssues(parsed.error)}`, {
      details: { file: path, issues: parsed.error.issues.slice(0, 20) },
    });
  }
  return parsed.data;
}

export async function isFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}

export async function isDirectory(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isDirectory();
  } catch {
    return false;
  }
}

export interface QuestionFile {
  file: string;
  path: string;
  split: SplitName;
  examples: SpiderExample[];
}

/**
 * The question files present in `dir`, parsed. Throws AppError(DATASET) when the
 * directory or its database/ folder is missing, when no question file exists,
 * or when one is malformed.
 */
export async function readQuestionFiles(dir: string): Promise<QuestionFile[]> {
  if (!(await isDirectory(dir))) throw new AppError(ErrorCode.DATASET, `${dir}: dataset directory does not exist`, { details: { file: dir } });
  const databaseDir = join(dir, DATABASE_DIR);
  if (!(await isDirectory(databaseDir))) {
    throw new AppError(ErrorCode.DATASET, `${databaseDir}: missing the database/ folder of a Spider-layout dataset`, { details: { file: databaseDir } });
  }
  const found: QuestionFile[] = [];
  for (const { file, split } of questionFiles) {
    const path = join(dir, file);
    if (!(await isFile(path))) continue;
    found.push({ file, path, split, examples: await readJsonFile(path, z.array(SpiderExampleSchema)) });
  }
  if (found.length === 0) {
    const names = questionFiles.map((q) => q.file).join(', ');
    throw new AppError(ErrorCode.DATASET, `${dir}: no question file (expected one of ${names})`, { details: { file: dir } });
  }
  return found;
}
