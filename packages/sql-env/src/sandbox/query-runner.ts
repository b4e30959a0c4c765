import Database from 'better-sqlite3';
import type { Cell } from '@sqlenv/protocol';
import { AppError, ErrorCode, toAppError } from '@sqlenv/shared';
import type { QueryLimits } from './executor-config.ts';
import { validateSql } from './sql-validator.ts';

/** The rows of one query, capped while fetching. */
export interface QueryResult {
  columns: string[];
  rows: Cell[][];
  /** True when rows were left unfetched (past maxRows or past the result size budget). */
  truncated: boolean;
  /** True when at least one cell was cut to maxCellChars. */
  cellsTruncated: boolean;
  /** Time spent preparing and fetching inside SQLite (in the child), in milliseconds. */
  elapsedMs: number;
}

type Statement = Database.Statement<unknown[], unknown[]>;

interface CachedStatement {
  stmt: Statement;
  columns: string[];
  dbPath: string;
}

/** Characters a non-string cell is charged against the result budget. */
const SCALAR_CELL_CHARS = 8;
const ELLIPSIS = '…';

/**
 * Convert one SQLite value to a Cell without ever holding more than
 * `maxCellChars` of it in the result. Integers arrive as JS numbers (safeIntegers
 * is off: values beyond ±2^53 lose precision, which Spider-style data never
 * reaches, and BigInt would not survive JSON). Non-finite reals (1e999) become
 * SQLite's own text 'Inf' / '-Inf' because JSON and the protocol's number
 * schema cannot carry them. BLOBs become lower-case hex.
 */
function toCell(value: unknown, maxCellChars: number): { cell: Cell; cut: boolean } {
  if (value === null || value === undefined) return { cell: null, cut: false };
  if (typeof value === 'number') {
    if (Number.isFinite(value)) return { cell: value, cut: false };
    return { cell: value > 0 ? 'Inf' : value < 0 ? '-Inf' : null, cut: false };
  }
  if (typeof value === 'string') {
    if (value.length <= maxCellChars) return { cell: value, cut: false };
    let end = maxCellChars;
    // Do not split a surrogate pair: an unpaired half would be invalid Unicode.
    const code = value.charCodeAt(end - 1);
    if (code >= 0xd800 && code <= 0xdbff) end -= 1;
    return { cell: value.slice(0, end) + ELLIPSIS, cut: true };
  }
  if (typeof value === 'bigint') return { cell: value.toString(), cut: false };
  if (value instanceof Uint8Array) {
    const maxBytes = Math.floor(maxCellChars / 2);
    const cut = value.byteLength > maxBytes;
    const hex = Buffer.from(value.buffer, value.byteOffset, Math.min(value.byteLength, maxBytes)).toString('hex');
    return { cell: cut ? hex + ELLIPSIS : hex, cut };
  }
  return { cell: String(value), cut: false };
}

function sqliteError(error: unknown): AppError {
  if (error instanceof AppError) return error;
  if (error instanceof RangeError && /more than one statement/.test(error.message)) {
    return new AppError(ErrorCode.SQL_REJECTED, 'multiple statements are not allowed; only a single read-only SELECT (or WITH ... SELECT) query may run', { cause: error });
  }
  if (error instanceof Database.SqliteError || error instanceof RangeError || error instanceof TypeError) {
    return new AppError(ErrorCode.SQL_ERROR, error.message, { cause: error });
  }
  return toAppError(error, ErrorCode.SQL_ERROR);
}

/**
 * Second line of defence, from SQLite itself, after prepare: the statement
 * must return rows (not ATTACH, BEGIN, ...) and must not write
 * (sqlite3_stmt_readonly; catches e.g. INSERT ... RETURNING, which returns rows).
 */
export function assertReadOnlyStatement(stmt: { reader: boolean; readonly: boolean }): void {
  if (!stmt.reader) throw new AppError(ErrorCode.SQL_REJECTED, 'the statement returns no rows; only a single read-only SELECT (or WITH ... SELECT) query may run');
  if (!stmt.readonly) throw new AppError(ErrorCode.SQL_REJECTED, 'the statement would modify the database; only a single read-only SELECT (or WITH ... SELECT) query may run');
}

/**
 * Runs validated, read-only queries synchronously against cached read-only
 * connections, with a prepared-statement LRU. This is what each executor child
 * runs; it has NO timeout of its own (better-sqlite3 cannot interrupt a
 * query), so in-process use is only for trusted SQL and benchmarks.
 */
export class QueryRunner {
  private readonly databases = new Map<string, Database.Database>();
  /** key: dbPath + '\0' + sql; Map order = least recently used first. */
  private readonly statements = new Map<string, CachedStatement>();
  private heapLimitApplied = false;

  constructor(private readonly limits: QueryLimits & { applyHeapLimit?: boolean }) {}

  run(dbPath: string, sql: string, maxRows: number): QueryResult {
    const startedMs = performance.now();
    try {
      const cached = this.statement(dbPath, sql);
      const result = this.fetch(cached, maxRows);
      result.elapsedMs = Math.round((performance.now() - startedMs) * 1000) / 1000;
      return result;
    } catch (error) {
      throw sqliteError(error);
    }
  }

  /** Close every connection (statements die with them). */
  close(): void {
    this.statements.clear();
    for (const db of this.databases.values()) db.close();
    this.databases.clear();
  }

  private fetch(cached: CachedStatement, maxRows: number): QueryResult {
    const { maxCellChars, maxResultChars } = this.limits;
    const rows: Cell[][] = [];
    let truncated = false;
    let cellsTruncated = false;
    let budgetChars = maxResultChars;
    // Iterate instead of .all(): rows past the caps are never materialised.
    // Breaking out of for..of calls the iterator's return(), which resets the statement.
    for (const raw of cached.stmt.iterate()) {
      if (rows.length >= maxRows) {
        truncated = true;
        break;
      }
      const values = raw as unknown[];
      const row: Cell[] = new Array<Cell>(values.length);
      let rowChars = 0;
      for (let c = 0; c < values.length; c += 1) {
        const { cell, cut } = toCell(values[c], maxCellChars);
        row[c] = cell;
        if (cut) cellsTruncated = true;
        rowChars += typeof cell === 'string' ? cell.length : SCALAR_CELL_CHARS;
      }
      // Always keep the first row so a capped result is never silently empty.
      if (rowChars > budgetChars && rows.length > 0) {
        truncated = true;
        break;
      }
      budgetChars -= rowChars;
      rows.push(row);
    }
    return { columns: cached.columns, rows, truncated, cellsTruncated, elapsedMs: 0 };
  }

  private statement(dbPath: string, sql: string): CachedStatement {
    const key = `${dbPath}\0${sql}`;
    const hit = this.statements.get(key);
    if (hit !== undefined) {
      // Refresh recency (Map keeps insertion order).
      this.statements.delete(key);
      this.statements.set(key, hit);
      return hit;
    }
    const { statement } = validateSql(sql, this.limits);
    const db = this.database(dbPath);
    const stmt = db.prepare<unknown[], unknown[]>(statement);
    assertReadOnlyStatement(stmt);
    stmt.raw(true);
    const cached: CachedStatement = { stmt, columns: stmt.columns().map((c) => c.name), dbPath };
    if (this.limits.statementCacheSize > 0) {
      this.statements.set(key, cached);
      this.evictStatements();
    }
    return cached;
  }

  private evictStatements(): void {
    while (this.statements.size > this.limits.statementCacheSize) {
      const oldest = this.statements.keys().next();
      if (oldest.done === true) return;
      this.statements.delete(oldest.value);
    }
  }

  private database(dbPath: string): Database.Database {
    const open = this.databases.get(dbPath);
    if (open !== undefined) {
      this.databases.delete(dbPath);
      this.databases.set(dbPath, open);
      return open;
    }
    let db: Database.Database;
    try {
      db = new Database(dbPath, { readonly: true, fileMustExist: true });
    } catch (error) {
      throw new AppError(ErrorCode.NOT_FOUND, `cannot open database ${dbPath}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
    }
    // Trusted setup, defence in depth on top of the read-only open: refuse
    // writes at the SQL level too, and do not let schema-embedded SQL call
    // functions with side effects. better-sqlite3 never enables the SQL
    // load_extension() ("not authorized"); nothing here enables it.
    db.pragma('query_only = ON');
    db.pragma('trusted_schema = OFF');
    if (this.limits.applyHeapLimit === true && !this.heapLimitApplied && this.limits.sqliteHeapLimitBytes > 0) {
      db.pragma(`hard_heap_limit = ${this.limits.sqliteHeapLimitBytes}`);
      this.heapLimitApplied = true;
    }
    this.databases.set(dbPath, db);
    this.evictDatabases();
    return db;
  }

  private evictDatabases(): void {
    while (this.databases.size > this.limits.maxOpenDatabases) {
      const oldest = this.databases.entries().next();
      if (oldest.done === true) return;
      const [path, db] = oldest.value;
      for (const [key, cached] of this.statements) if (cached.dbPath === path) this.statements.delete(key);
      this.databases.delete(path);
      db.close();
    }
  }
}
