import type { QuestionRecord, SplitName } from '@sqlenv/protocol';
import type { TableIndex } from '../env/resolve-table.ts';

/** A column as read from the SQLite file. */
export interface DatabaseColumn {
  name: string;
  /** Declared type as written in the schema (may be empty: SQLite columns need not declare one). */
  type: string;
  primaryKey: boolean;
}

/** A table as read from the SQLite file. */
export interface DatabaseTable {
  name: string;
  columns: readonly DatabaseColumn[];
  rowCount: number;
}

/** One database of a dataset. Shared read-only by every episode on it. */
export interface DatabaseInfo {
  dbId: string;
  /** Path of the SQLite file. */
  path: string;
  /** Tables in the database's own order and spelling. */
  tables: readonly DatabaseTable[];
  /** Lower-cased table name → real name (agents write names in any case). */
  tableIndex: TableIndex;
  /** Lower-cased table and column names (to tell names from double-quoted strings). */
  knownNames: ReadonlySet<string>;
}

/** Why a question is not playable. */
export const GoldFailureReason = {
  /** SQLite failed on the gold SQL. */
  SQL_ERROR: 'sql_error',
  /** The sandbox refused the gold SQL (not read-only, several statements...). */
  REJECTED: 'rejected',
  /** The gold SQL ran past the gold timeout. */
  TIMEOUT: 'timeout',
  /** The gold result has more rows than the loader keeps (goldMaxRows): too large to answer or grade. */
  TOO_LARGE: 'result_too_large',
  /**
   * A gold cell is longer than the executor returns (maxCellChars, 10,000 by
   * default): the stored value would be cut, so the full correct answer would
   * be judged wrong and a cut one right.
   */
  CELL_TOO_LONG: 'cell_too_long',
  /** The canonical answer is longer than an action may carry (MAX_ARGUMENT_CHARS): no agent could submit it. */
  ANSWER_TOO_LONG: 'answer_too_long',
  /** The question's database file is missing. */
  MISSING_DATABASE: 'missing_database',
  /** The executor failed for another reason (crash). */
  EXECUTOR: 'executor_error',
} as const;
export type GoldFailureReason = (typeof GoldFailureReason)[keyof typeof GoldFailureReason];

export interface GoldFailure {
  question_id: string;
  database_name: string;
  split: SplitName;
  question_text: string;
  gold_sql: string;
  reason: GoldFailureReason;
  message: string;
}

/** A database left out of a dataset loaded with `skipMissingDbs`, and why. */
export interface SkippedDatabase {
  db_id: string;
  /** Where its SQLite file was expected. */
  path: string;
  reason: string;
  /** Questions that refer to it (all left out, as `missing_database` failures). */
  questions: number;
}

export interface Dataset {
  /** 'builtin' or the directory's base name. */
  readonly name: string;
  /** Absolute path of the Spider-layout directory. */
  readonly dir: string;
  readonly databases: ReadonlyMap<string, DatabaseInfo>;
  /** Playable questions (gold SQL ran; an empty result is answered "none"), in file order, train before dev. */
  readonly questions: readonly QuestionRecord[];
  /** Splits with at least one playable question. */
  readonly splits: readonly SplitName[];
  /** The split reset() uses when none is given: 'train' if present, else the only split. */
  readonly defaultSplit: SplitName;
  /** Questions left out of `questions`, with the reason. */
  readonly failures: readonly GoldFailure[];
  /** Databases left out because their file is missing or empty (only when loaded with skipMissingDbs). */
  readonly skippedDatabases: readonly SkippedDatabase[];
  /** A playable question by id. */
  question(questionId: string): QuestionRecord | undefined;
  /** Playable questions of a split (optionally of one database), in dataset order. Cached per key. */
  questionsOf(split: SplitName, dbId?: string): readonly QuestionRecord[];
}
