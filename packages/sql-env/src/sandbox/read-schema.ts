import Database from 'better-sqlite3';
import { AppError, ErrorCode } from '@sqlenv/shared';

/**
 * Trusted, in-process reads the environment does itself (schema
 * introspection). Internal code may use PRAGMA; agents may not (their SQL goes
 * through SqlExecutor). These calls are synchronous and assume the database
 * is an ordinary file of modest size: a row count is a full `count(*)`.
 */

export interface ColumnInfo {
  name: string;
  /** Declared type as written in the schema ('' when none). */
  type: string;
  primaryKey: boolean;
}

export interface TableInfo {
  name: string;
  columns: ColumnInfo[];
  rowCount: number;
}

/** Quote a name for SQLite ("my table" → "\"my table\""), so spaces, reserved words and mixed case survive. */
export function quoteIdentifier(name: string): string {
  if (name.includes('\0')) throw new AppError(ErrorCode.VALIDATION, 'an SQL identifier cannot contain a NUL character');
  return `"${name.replaceAll('"', '""')}"`;
}

interface TableInfoRow {
  name: string;
  type: string;
  pk: number;
}

/** Open a database read-only for trusted reads; the caller closes it. */
export function openReadonly(dbPath: string): Database.Database {
  try {
    return new Database(dbPath, { readonly: true, fileMustExist: true });
  } catch (error) {
    throw new AppError(ErrorCode.NOT_FOUND, `cannot open database ${dbPath}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
}

/** Tables of a database (user tables only, in schema order), with their columns and row counts. */
export function readSchema(dbPath: string): TableInfo[] {
  const db = openReadonly(dbPath);
  try {
    const names = db
      .prepare<[], { name: string }>("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY rowid")
      .all()
      .map((r) => r.name);
    return names.map((name) => {
      const quoted = quoteIdentifier(name);
      const columns = db
        .prepare<[], TableInfoRow>(`PRAGMA table_info(${quoted})`)
        .all()
        .map((c) => ({ name: c.name, type: c.type, primaryKey: c.pk > 0 }));
      const counted = db.prepare<[], { n: number }>(`SELECT count(*) AS n FROM ${quoted}`).get();
      return { name, columns, rowCount: counted?.n ?? 0 };
    });
  } finally {
    db.close();
  }
}
