import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { z } from 'zod';
import { MAX_ARGUMENT_CHARS, type Cell, type QuestionRecord, type SplitName } from '@sqlenv/protocol';
import { AppError, ErrorCode, ensurePrivateDir, formatZodIssues, isAppError, silentLogger, type Logger } from '@sqlenv/shared';
import { readSchema, type SqlExecutor } from '../sandbox/index.ts';
import { builtinDatasetDir } from '../builtin/index.ts';
import { deriveAnswerType, formatGoldAnswer } from '../verifier/index.ts';
import { buildTableIndex } from '../env/resolve-table.ts';
import { isDoubleQuotedStringError, singleQuoteStrings } from '../env/double-quoted-strings.ts';
import type { Dataset, DatabaseInfo, GoldFailure, SkippedDatabase } from './dataset.ts';
import { GoldFailureReason } from './dataset.ts';
import { goldCacheKey, goldCachePath, goldFingerprint, goldKey, pruneGoldCache, readGoldCache, writeGoldCache, type GoldEntry } from './gold-cache.ts';
import { readQuestionFiles, resolveDatabaseFile, type QuestionFile } from './spider-files.ts';
import { deriveDifficulty, extraSelectCount, tablesInvolved } from './sql-analysis.ts';

/** Loader settings; defaults live here only. */
export const DatasetLoadConfigSchema = z.strictObject({
  /** Time limit of one gold query, in milliseconds (the environment's query limit is 5 s too). */
  goldTimeoutMs: z.number().int().positive().default(5_000),
  /** Rows of a gold result kept at most; a larger result makes the question a `result_too_large` failure. */
  goldMaxRows: z.number().int().positive().default(100_000),
  /** Gold queries in flight at once, so the executor pool stays busy. */
  goldConcurrency: z.number().int().positive().default(32),
  /**
   * Directory for the built-in dataset and gold caches; default
   * `<os tmpdir>/sqlenv-cache-<uid>`. Created 0700; refused (UNSAFE_PATH) when
   * another user owns it or group/others may write to it.
   */
  cacheDir: z.string().min(1).optional(),
  /**
   * Play without the databases whose file is missing or empty (their questions are left out and
   * listed in `skippedDatabases`) instead of refusing the dataset. Off by default: a dataset that
   * silently loses databases runs fewer questions than asked for and still exits 0.
   */
  skipMissingDbs: z.boolean().default(false),
});
export type DatasetLoadConfig = z.infer<typeof DatasetLoadConfigSchema>;

export interface LoadDatasetOptions extends Partial<DatasetLoadConfig> {
  executor: SqlExecutor;
  logger?: Logger;
}

/** This user's own cache directory in the OS temp directory (a name per user: see ensurePrivateDir). */
export function defaultCacheDir(): string {
  return join(tmpdir(), `sqlenv-cache-${process.getuid?.() ?? 'user'}`);
}

/**
 * The cache directory, created 0700 or checked: the built-in dataset and the
 * gold answers in it are trusted, so no other user may have written there.
 * A directory the operator named may be a symlink; the default may not.
 */
function privateCacheDir(configured: string | undefined): string {
  const dir = resolve(configured ?? defaultCacheDir());
  return ensurePrivateDir(dir, {
    followSymlink: dir !== defaultCacheDir(),
    advice: 'another user could plant datasets or gold answers there; remove it, fix its owner and mode (chmod go-w), or set another cache directory (SQLENV_CACHE_DIR)',
  });
}

interface PendingQuestion {
  questionId: string;
  dbId: string;
  split: SplitName;
  questionText: string;
  goldSql: string;
  /** The question file it came from (named when its db_id is refused). */
  file: string;
}

/**
 * The generated datasets a source name stands for: 'builtin', the standard one, and 'builtin-heldout',
 * the same databases and train split with 3 more draws per dev question of the dev templates appended
 * to its dev split (212 held-out questions instead of 60, none a train question; the standard dev
 * questions stay a prefix), for evaluations that need a narrower interval.
 */
export const BUILTIN_SOURCES: Readonly<Record<string, { extraDevPerInstance: number }>> = {
  builtin: { extraDevPerInstance: 0 },
  'builtin-heldout': { extraDevPerInstance: 3 },
};

/**
 * Load a Spider-layout dataset ('builtin' = the generated one, 'builtin-heldout' its larger dev split: BUILTIN_SOURCES). Runs every gold
 * query once through the sandbox (read-only, with the timeout) to precompute
 * gold answers, or reads them from the gold cache. Questions whose gold SQL
 * fails or returns nothing are left out of `questions` and listed in `failures`.
 */
export async function loadDataset(source: 'builtin' | string, options: LoadDatasetOptions): Promise<Dataset> {
  const { executor, logger: parentLogger, ...rest } = options;
  const parsed = DatasetLoadConfigSchema.safeParse(rest);
  if (!parsed.success) throw new AppError(ErrorCode.VALIDATION, `invalid dataset options: ${formatZodIssues(parsed.error)}`);
  const config = parsed.data;
  const cacheDir = privateCacheDir(config.cacheDir);
  const builtin = Object.hasOwn(BUILTIN_SOURCES, source) ? BUILTIN_SOURCES[source] : undefined;
  const dir = builtin !== undefined ? await builtinDatasetDir(cacheDir, builtin) : resolve(source);
  const name = builtin !== undefined ? source : basename(dir);
  const logger = (parentLogger ?? silentLogger).child({ component: 'dataset', dataset: name });
  const startedMs = performance.now();

  const files = await readQuestionFiles(dir);
  const pending = numberQuestions(files);
  const { databases, skipped } = await readDatabases(dir, pending, config.skipMissingDbs, logger);
  const schemasMs = Math.round(performance.now() - startedMs);

  const fingerprint = await goldFingerprint({
    contentFiles: files.map((f) => f.path),
    databaseFiles: [...databases.values()].map((db) => db.path),
    // maxCellChars decides which gold cells come back cut (cell_too_long).
    settings: { goldMaxRows: config.goldMaxRows, maxCellChars: executor.config.maxCellChars },
  });
  const cachePath = goldCachePath(cacheDir, dir, fingerprint);
  const cacheKey = readCacheKey(cacheDir, logger);
  const gold = cacheKey === undefined ? new Map<string, GoldEntry>() : await readGoldCache(cachePath, fingerprint, cacheKey, logger);
  const cachedCount = gold.size;
  const ran = await runGoldQueries(pending.filter((q) => databases.has(q.dbId)), databases, gold, executor, config);
  if (ran > 0 && cacheKey !== undefined) {
    try {
      writeGoldCache(cachePath, fingerprint, cacheKey, cacheable(gold));
      const removed = await pruneGoldCache(cacheDir, dir, cachePath);
      if (removed.length > 0) logger.debug({ removed }, 'removed outdated gold cache files');
    } catch (error) {
      // A read-only cache dir costs speed on the next load, not correctness.
      logger.warn({ err: error, path: cachePath }, 'could not write the gold cache');
    }
  }

  const goldMs = Math.round(performance.now() - startedMs) - schemasMs;
  const questions: QuestionRecord[] = [];
  const failures: GoldFailure[] = [];
  for (const question of pending) {
    const outcome = buildRecord(question, databases.get(question.dbId), gold.get(goldKey(question.dbId, question.goldSql)), executor.config.maxCellChars);
    if ('record' in outcome) questions.push(outcome.record);
    else failures.push(outcome.failure);
  }
  if (questions.length === 0) {
    throw new AppError(ErrorCode.DATASET, `${dir}: no playable question (${failures.length} gold failures)`, {
      details: { failures: failures.slice(0, 20) },
    });
  }
  const elapsedMs = Math.round(performance.now() - startedMs);
  logger.info({ questions: questions.length, failures: failures.length, databases: databases.size, goldRun: ran, goldCached: cachedCount, schemasMs, goldMs, elapsedMs }, 'dataset loaded');
  if (failures.length > 0) {
    // One line for the operator; each failure in detail at debug level (and in dataset.failures).
    const byReason: Record<string, number> = {};
    for (const failure of failures) byReason[failure.reason] = (byReason[failure.reason] ?? 0) + 1;
    logger.warn({ failures: failures.length, byReason, examples: failures.slice(0, 5).map((f) => `${f.question_id}: ${f.reason}`) }, 'questions left out of the playable set');
    for (const failure of failures) logger.debug({ questionId: failure.question_id, reason: failure.reason, message: failure.message }, 'question not playable');
  }
  const emptyGold = questions.filter((q) => q.gold_rows.length === 0);
  if (emptyGold.length > 0) {
    logger.info({ count: emptyGold.length, examples: emptyGold.slice(0, 5).map((q) => q.question_id) }, 'questions whose gold result is empty: expected answer "none"');
  }
  return createDataset(name, dir, databases, questions, failures, skipped);
}

/** Question ids `{db_id}_{split}_{index}`; the index counts within a split across its files. */
function numberQuestions(files: readonly QuestionFile[]): PendingQuestion[] {
  const nextIndex: Partial<Record<SplitName, number>> = {};
  const pending: PendingQuestion[] = [];
  for (const file of files) {
    for (const example of file.examples) {
      const index = nextIndex[file.split] ?? 0;
      nextIndex[file.split] = index + 1;
      pending.push({
        questionId: `${example.db_id}_${file.split}_${index}`,
        dbId: example.db_id,
        split: file.split,
        questionText: example.question,
        goldSql: example.query,
        file: file.path,
      });
    }
  }
  return pending;
}

/**
 * Schemas of every database some question refers to. A db_id that is not a plain name, or whose
 * file lies outside the dataset (symlinks followed), refuses the dataset (UNSAFE_PATH); a missing
 * or empty file refuses it too (DATASET), unless `skipMissing`: then that database is skipped, its
 * questions become `missing_database` failures, and the skipped ones are returned.
 */
async function readDatabases(dir: string, pending: readonly PendingQuestion[], skipMissing: boolean, logger: Logger): Promise<{ databases: Map<string, DatabaseInfo>; skipped: SkippedDatabase[] }> {
  const databases = new Map<string, DatabaseInfo>();
  const unusable: SkippedDatabase[] = [];
  for (const dbId of new Set(pending.map((q) => q.dbId))) {
    const file = await resolveDatabaseFile(dir, dbId);
    if (!file.ok) {
      const asking = pending.filter((q) => q.dbId === dbId);
      if (file.kind === 'unsafe') {
        const sources = [...new Set(asking.map((q) => q.file))].join(', ');
        throw new AppError(ErrorCode.UNSAFE_PATH, `${sources}: ${file.reason}; a db_id must name a directory under ${dir}/database/`, { details: { file: sources, db_id: dbId } });
      }
      unusable.push({ db_id: dbId, path: file.path, reason: file.reason, questions: asking.length });
      continue;
    }
    let tables;
    try {
      tables = readSchema(file.path);
    } catch (cause) {
      throw new AppError(ErrorCode.DATASET, `${file.path}: cannot read the database schema (${(cause as Error).message})`, { cause, details: { file: file.path } });
    }
    const knownNames = new Set(tables.flatMap((t) => [t.name, ...t.columns.map((c) => c.name)]).map((n) => n.toLowerCase()));
    databases.set(dbId, { dbId, path: file.path, tables, tableIndex: buildTableIndex(tables.map((t) => t.name)), knownNames });
  }
  if (unusable.length > 0 && !skipMissing) {
    const list = unusable.map((s) => `${s.db_id} (${s.reason}; ${s.questions} question${s.questions === 1 ? '' : 's'})`).join(', ');
    throw new AppError(ErrorCode.DATASET, `${dir}: ${unusable.length} database file(s) missing or empty: ${list}. Restore them, or skip them with --skip-missing-dbs (SQLENV_SKIP_MISSING_DBS=1)`, {
      details: { file: dir, missing: unusable },
    });
  }
  if (unusable.length > 0) logger.warn({ skipped: unusable }, 'databases skipped (skipMissingDbs): their questions are left out');
  return { databases, skipped: unusable };
}

/**
 * The gold cache's HMAC key, or undefined when none can be made (a read-only
 * cache directory: gold answers are then computed on every load). A key file
 * that may not be trusted is an error (UNSAFE_PATH), not a reason to go on.
 */
function readCacheKey(cacheDir: string, logger: Logger): Buffer | undefined {
  try {
    return goldCacheKey(cacheDir);
  } catch (error) {
    if (isAppError(error)) throw error;
    logger.warn({ err: error, cacheDir }, 'no gold cache key could be made (read-only cache directory?): gold answers are computed on every load');
    return undefined;
  }
}

/** Run the gold queries missing from `gold` (deduplicated), a bounded number at a time. Returns how many ran. */
async function runGoldQueries(
  pending: readonly PendingQuestion[],
  databases: ReadonlyMap<string, DatabaseInfo>,
  gold: Map<string, GoldEntry>,
  executor: SqlExecutor,
  config: DatasetLoadConfig,
): Promise<number> {
  const todo = new Map<string, PendingQuestion>();
  for (const q of pending) {
    const key = goldKey(q.dbId, q.goldSql);
    if (!gold.has(key)) todo.set(key, q);
  }
  const queue = [...todo];
  const worker = async (): Promise<void> => {
    for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
      const [key, q] = next;
      const db = databases.get(q.dbId) as DatabaseInfo;
      gold.set(key, await runGold(executor, db, q.goldSql, config));
    }
  };
  await Promise.all(Array.from({ length: Math.min(config.goldConcurrency, queue.length) }, worker));
  return todo.size;
}

/**
 * Run one gold query. Spider's gold SQL often writes strings in double quotes,
 * which this SQLite build refuses: such a query is retried with them turned
 * into single-quoted literals, and the rewritten text becomes the record's
 * gold_sql (see env/double-quoted-strings.ts).
 */
async function runGold(executor: SqlExecutor, db: DatabaseInfo, sql: string, config: DatasetLoadConfig): Promise<GoldEntry> {
  const run = async (text: string): Promise<GoldEntry> => {
    try {
      const result = await executor.query(db.path, text, { maxRows: config.goldMaxRows, timeoutMs: config.goldTimeoutMs });
      return { ok: true, columns: result.columns, rows: result.rows, truncated: result.truncated };
    } catch (error) {
      if (!isAppError(error) || error.code === ErrorCode.ABORTED) throw error;
      return { ok: false, code: error.code, message: error.message };
    }
  };
  const first = await run(sql);
  if (first.ok || first.code !== ErrorCode.SQL_ERROR || !isDoubleQuotedStringError(first.message)) return first;
  const rewritten = singleQuoteStrings(sql, db.knownNames);
  if (rewritten === sql) return first;
  const second = await run(rewritten);
  return second.ok ? { ...second, sql: rewritten } : first;
}

/** Timeouts and crashes may be load-dependent: keep them out of the cache so the next load retries them. */
function cacheable(gold: ReadonlyMap<string, GoldEntry>): Map<string, GoldEntry> {
  const transient = new Set<string>([ErrorCode.TIMEOUT, ErrorCode.EXECUTOR_CRASHED, ErrorCode.CAPACITY]);
  return new Map([...gold].filter(([, entry]) => entry.ok || !transient.has(entry.code)));
}

const failureReasonByCode: Readonly<Record<string, GoldFailureReason>> = {
  [ErrorCode.SQL_ERROR]: GoldFailureReason.SQL_ERROR,
  [ErrorCode.SQL_REJECTED]: GoldFailureReason.REJECTED,
  [ErrorCode.TIMEOUT]: GoldFailureReason.TIMEOUT,
};

/**
 * Was a cell cut by the executor? A cut text or BLOB cell is its first
 * maxCellChars (±1) characters followed by '…'. A value that is exactly that
 * long and really ends with '…' is taken for a cut one too: being left out is
 * the safe side.
 */
function isCutCell(cell: Cell, maxCellChars: number): boolean {
  return typeof cell === 'string' && cell.length >= maxCellChars && cell.endsWith('…');
}

function buildRecord(
  q: PendingQuestion,
  db: DatabaseInfo | undefined,
  entry: GoldEntry | undefined,
  maxCellChars: number,
): { record: QuestionRecord } | { failure: GoldFailure } {
  const fail = (reason: GoldFailureReason, message: string): { failure: GoldFailure } => ({
    failure: { question_id: q.questionId, database_name: q.dbId, split: q.split, question_text: q.questionText, gold_sql: q.goldSql, reason, message },
  });
  if (db === undefined || entry === undefined) return fail(GoldFailureReason.MISSING_DATABASE, `database file for '${q.dbId}' is missing`);
  if (!entry.ok) return fail(failureReasonByCode[entry.code] ?? GoldFailureReason.EXECUTOR, entry.message);
  if (entry.truncated) return fail(GoldFailureReason.TOO_LARGE, `gold result has more than ${entry.rows.length} rows`);
  if (entry.rows.some((row) => row.some((cell) => isCutCell(cell, maxCellChars)))) {
    return fail(GoldFailureReason.CELL_TOO_LONG, `a gold cell is longer than the ${maxCellChars} characters the executor returns (maxCellChars); a cut value cannot be verified exactly`);
  }
  // An empty gold result stays playable: the expected answer is "none" (see
  // verifier EMPTY_RESULT_ANSWER). The load reports these questions by count.
  const tables = tablesInvolved(q.goldSql, db.tables.map((t) => t.name));
  const answerType = deriveAnswerType(entry.columns, entry.rows);
  const goldAnswer = formatGoldAnswer(answerType, entry.rows);
  if (goldAnswer.length > MAX_ARGUMENT_CHARS) {
    return fail(GoldFailureReason.ANSWER_TOO_LONG, `the answer is ${goldAnswer.length} characters long, more than an action may carry (${MAX_ARGUMENT_CHARS})`);
  }
  return {
    record: {
      question_id: q.questionId,
      question_text: q.questionText,
      database_name: q.dbId,
      gold_sql: entry.sql ?? q.goldSql,
      gold_answer: goldAnswer,
      gold_columns: entry.columns,
      gold_rows: entry.rows,
      answer_type: answerType,
      difficulty: deriveDifficulty(tables.length, extraSelectCount(q.goldSql)),
      tables_involved: tables,
      split: q.split,
    },
  };
}

function createDataset(
  name: string,
  dir: string,
  databases: ReadonlyMap<string, DatabaseInfo>,
  questions: readonly QuestionRecord[],
  failures: readonly GoldFailure[],
  skippedDatabases: readonly SkippedDatabase[],
): Dataset {
  const byId = new Map(questions.map((q) => [q.question_id, q]));
  const splits = (['train', 'dev'] as const).filter((split) => questions.some((q) => q.split === split));
  const defaultSplit: SplitName = splits.includes('train') ? 'train' : (splits[0] as SplitName);
  const pools = new Map<string, readonly QuestionRecord[]>();
  return {
    name,
    dir,
    databases,
    questions,
    splits,
    defaultSplit,
    failures,
    skippedDatabases,
    question: (questionId) => byId.get(questionId),
    questionsOf(split, dbId) {
      // Only known databases get a cache entry, so arbitrary client input cannot grow the map.
      if (dbId !== undefined && !databases.has(dbId)) return [];
      const key = `${split}\u0000${dbId ?? ''}`;
      let pool = pools.get(key);
      if (pool === undefined) {
        pool = questions.filter((q) => q.split === split && (dbId === undefined || q.database_name === dbId));
        pools.set(key, pool);
      }
      return pool;
    },
  };
}
