import Database from 'better-sqlite3';
import type { Cell } from '@sqlenv/protocol';
import { AppError, ErrorCode, toAppError } from '@sqlenv/shared/app-error';
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
  /** Value of the runner's use counter at the latest use (for LRU eviction). */
  lastUsed: number;
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
 * query), so in-process use is only for trusted SQL, benchmarks, and the
 * executor's fast path (statements a child proved quick, see fast-path.ts).
 */
export class QueryRunner {
  private readonly databases = new Map<string, Database.Database>();
  /**
   * Prepared statements by database path, then SQL text (two lookups on the
   * caller's own strings, no key to build on the hot path). Recency is a
   * counter stamped on each use; eviction scans, but only when a statement is
   * prepared, which costs far more anyway.
   */
  private readonly statements = new Map<string, Map<string, CachedStatement>>();
  private statementCount = 0;
  private uses = 0;
  private heapLimitApplied = false;

  constructor(private readonly limits: QueryLimits & { applyHeapLimit?: boolean }) {}

  /**
   * `bounded`: the caller knows this exact statement returns at most
   * `maxRows` rows within the result budget (the executor's fast path: a
   * child ran it before and it was not truncated), so all rows are fetched in
   * one call instead of row by row. The caps are applied either way.
   */
  run(dbPath: string, sql: string, maxRows: number, bounded = false): QueryResult {
    const startedMs = performance.now();
    try {
      const cached = this.statement(dbPath, sql);
      const result = bounded ? this.fetchAll(cached, maxRows) : this.fetch(cached, maxRows);
      result.elapsedMs = Math.round((performance.now() - startedMs) * 1000) / 1000;
      return result;
    } catch (error) {
      throw sqliteError(error);
    }
  }

  /** True when `sql` on `dbPath` is already prepared (its next run skips opening and preparing). */
  isPrepared(dbPath: string, sql: string): boolean {
    return this.statements.get(dbPath)?.has(sql) === true;
  }

  /** Close every connection (statements die with them). */
  close(): void {
    this.statements.clear();
    this.statementCount = 0;
    for (const db of this.databases.values()) db.close();
    this.databases.clear();
  }

  private fetch(cached: CachedStatement, maxRows: number): QueryResult {
    const rows: Cell[][] = [];
    let truncated = false;
    const state = { budgetChars: this.limits.maxResultChars, cellsTruncated: false };
    // Iterate instead of .all(): rows past the caps are never materialised.
    // Breaking out of for..of calls the iterator's return(), which resets the statement.
    for (const raw of cached.stmt.iterate()) {
      if (rows.length >= maxRows || !this.admitRow(raw as unknown[], rows.length, state)) {
        truncated = true;
        break;
      }
      rows.push(raw as Cell[]);
    }
    return { columns: cached.columns, rows, truncated, cellsTruncated: state.cellsTruncated, elapsedMs: 0 };
  }

  private fetchAll(cached: CachedStatement, maxRows: number): QueryResult {
    const all = cached.stmt.all() as Cell[][];
    const state = { budgetChars: this.limits.maxResultChars, cellsTruncated: false };
    let kept = 0;
    while (kept < all.length && kept < maxRows && this.admitRow(all[kept] as unknown[], kept, state)) kept += 1;
    const truncated = kept < all.length;
    if (truncated) all.length = kept;
    return { columns: cached.columns, rows: all, truncated, cellsTruncated: state.cellsTruncated, elapsedMs: 0 };
  }

  /**
   * Turn one raw row (better-sqlite3 gives a fresh array per row) into Cells
   * in place, charging it to the result budget. False when the row does not
   * fit (it is then dropped); the first row is always admitted so a capped
   * result is never silently empty.
   */
  private admitRow(values: unknown[], index: number, state: { budgetChars: number; cellsTruncated: boolean }): boolean {
    const { maxCellChars } = this.limits;
    let rowChars = 0;
    for (let c = 0; c < values.length; c += 1) {
      const value = values[c];
      // The common cells need no conversion: finite numbers, NULLs, short strings.
      if (typeof value === 'string' && value.length <= maxCellChars) {
        rowChars += value.length;
      } else if (value === null || (typeof value === 'number' && Number.isFinite(value))) {
        rowChars += SCALAR_CELL_CHARS;
      } else {
        const { cell, cut } = toCell(value, maxCellChars);
        values[c] = cell;
        if (cut) state.cellsTruncated = true;
        rowChars += typeof cell === 'string' ? cell.length : SCALAR_CELL_CHARS;
      }
    }
    if (rowChars > state.budgetChars && index > 0) return false;
    state.budgetChars -= rowChars;
    return true;
  }

  private statement(dbPath: string, sql: string): CachedStatement {
    this.uses += 1;
    const hit = this.statements.get(dbPath)?.get(sql);
    if (hit !== undefined) {
      hit.lastUsed = this.uses;
      return hit;
    }
    const { statement } = validateSql(sql, this.limits);
    const db = this.database(dbPath);
    const stmt = db.prepare<unknown[], unknown[]>(statement);
    assertReadOnlyStatement(stmt);
    stmt.raw(true);
    const cached: CachedStatement = { stmt, columns: stmt.columns().map((c) => c.name), lastUsed: this.uses };
    if (this.limits.statementCacheSize > 0) {
      if (this.statementCount >= this.limits.statementCacheSize) this.evictLeastRecentStatement();
      let forDb = this.statements.get(dbPath);
      if (forDb === undefined) {
        forDb = new Map();
        this.statements.set(dbPath, forDb);
      }
      forDb.set(sql, cached);
      this.statementCount += 1;
    }
    return cached;
  }

  private evictLeastRecentStatement(): void {
    let oldest: { forDb: Map<string, CachedStatement>; sql: string; lastUsed: number } | undefined;
    for (const forDb of this.statements.values()) {
      for (const [sql, cached] of forDb) if (oldest === undefined || cached.lastUsed < oldest.lastUsed) oldest = { forDb, sql, lastUsed: cached.lastUsed };
    }
    if (oldest === undefined) return;
    oldest.forDb.delete(oldest.sql);
    this.statementCount -= 1;
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
      this.statementCount -= this.statements.get(path)?.size ?? 0;
      this.statements.delete(path);
      this.databases.delete(path);
      db.close();
    }
  }
}
