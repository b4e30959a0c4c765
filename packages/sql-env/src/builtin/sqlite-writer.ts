import Database from 'better-sqlite3';
import type { Cell } from '@sqlenv/protocol';
import { AppError, ErrorCode } from '@sqlenv/shared';
import type { ColumnSpec, DomainRows, TableSpec } from './domain-spec.ts';

/** Always quote: the built-in schemas deliberately use spaces and SQL keywords as names. */
export function quoteIdentifier(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

function columnSql(column: ColumnSpec): string {
  const parts = [quoteIdentifier(column.name), column.type];
  if (column.primaryKey === true) parts.push('PRIMARY KEY');
  else if (column.nullable !== true) parts.push('NOT NULL');
  if (column.references !== undefined) {
    parts.push(`REFERENCES ${quoteIdentifier(column.references.table)} (${quoteIdentifier(column.references.column)})`);
  }
  return parts.join(' ');
}

export function createTableSql(table: TableSpec): string {
  return `CREATE TABLE ${quoteIdentifier(table.name)} (\n  ${table.columns.map(columnSql).join(',\n  ')}\n)`;
}

/**
 * Creates the database file at `path` (which must not exist) and fills it.
 * Returns the open connection, switched to query_only so the caller can run
 * the gold queries on it read-only. Foreign keys are enforced while
 * inserting, so generated data that breaks a reference fails here.
 */
export function writeDatabase(path: string, tables: readonly TableSpec[], rows: DomainRows): Database.Database {
  const db = new Database(path);
  try {
    // A single self-contained file: no -wal / -shm companions left next to it.
    db.pragma('journal_mode = DELETE');
    db.pragma('foreign_keys = ON');
    db.transaction(() => {
      for (const table of tables) {
        db.exec(createTableSql(table));
        const names = table.columns.map((column) => column.name);
        const insert = db.prepare(
          `INSERT INTO ${quoteIdentifier(table.name)} (${names.map(quoteIdentifier).join(', ')}) VALUES (${names.map(() => '?').join(', ')})`,
        );
        for (const row of rows.get(table.name) ?? []) {
          const unknown = Object.keys(row).filter((key) => !names.includes(key));
          if (unknown.length > 0) {
            throw new AppError(ErrorCode.INTERNAL, `row for ${table.name} has unknown columns: ${unknown.join(', ')}`);
          }
          insert.run(names.map((name): Cell => row[name] ?? null));
        }
      }
    })();
    db.pragma('query_only = ON');
    return db;
  } catch (error) {
    db.close();
    throw error;
  }
}
