import type { Cell } from '@sqlenv/protocol';
import type { Mulberry32 } from '@sqlenv/shared';
import type { QuestionTemplate } from './question-template.ts';
import type { Vocabulary } from './vocabulary.ts';

/** The SQLite storage classes the built-in databases use. */
export type SqlType = 'INTEGER' | 'REAL' | 'TEXT';

export interface ColumnSpec {
  name: string;
  type: SqlType;
  primaryKey?: boolean;
  /** NULLs allowed; most columns are NOT NULL so NULLs appear only where they mean something. */
  nullable?: boolean;
  references?: { table: string; column: string };
  /** TEXT holding an ISO date or timestamp; reported as "time" in tables.json like Spider does. */
  temporal?: boolean;
}

export interface TableSpec {
  name: string;
  columns: readonly ColumnSpec[];
}

/** One row keyed by column name; a missing key is stored as NULL. */
export type RowData = Readonly<Record<string, Cell>>;

/** Rows per table name, in insertion order (parents before children). */
export type DomainRows = ReadonlyMap<string, readonly RowData[]>;

export interface DomainSpec {
  /** The Spider db_id: directory and file name. */
  dbId: string;
  title: string;
  /** One sentence for the docs. */
  summary: string;
  tables: readonly TableSpec[];
  /** The rows, with names and places from `vocabulary` (the standard word lists when omitted). */
  generateRows(rng: Mulberry32, vocabulary?: Vocabulary): DomainRows;
  templates: readonly QuestionTemplate[];
}
