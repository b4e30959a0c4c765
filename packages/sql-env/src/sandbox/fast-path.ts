/**
 * The executor's in-process fast path: which statements may skip the child
 * process, and the bounded memory of the ones that qualified.
 *
 * A child process exists for one reason: a query that never ends can only be
 * stopped by killing the process it runs in (sql-executor.ts). For a cheap
 * query that is all cost and no benefit — the round trip through a child
 * (write, wake-up, JSON both ways) costs more than SQLite's own work. So a
 * statement that has already run to completion in a child, quickly, is then
 * run in-process. That is safe because its work is a pure function of its
 * text and the data: the databases are read-only, the statement is the same
 * SQL on the same connection settings with the same row cap, and statements
 * that call anything that changes between runs (random(), the clock) never
 * qualify. The same work takes the same time, so a statement proven to finish
 * in microseconds cannot run away on its next run. As a guard against the
 * unexpected, an in-process run that takes much longer than its proof
 * demotes the statement back to the child path.
 */
import { TokenKind, tokenizeSql } from './sql-tokenizer.ts';

/** Functions whose result varies between runs (and so may the work that depends on them). */
const VARYING_FUNCTIONS = new Set([
  'RANDOM', 'RANDOMBLOB', 'DATE', 'TIME', 'DATETIME', 'JULIANDAY', 'UNIXEPOCH', 'STRFTIME', 'TIMEDIFF',
  'CHANGES', 'TOTAL_CHANGES', 'LAST_INSERT_ROWID',
]);
/** Keywords that read the clock without parentheses. */
const CLOCK_KEYWORDS = new Set(['CURRENT_DATE', 'CURRENT_TIME', 'CURRENT_TIMESTAMP']);

/**
 * True when nothing in `sql` can make two runs on the same read-only data do
 * different work: no call to random(), randomblob(), a date/time function or
 * a change counter, and no CURRENT_DATE / CURRENT_TIME / CURRENT_TIMESTAMP.
 * Conservative on purpose: a column that happens to be named `date` followed
 * by `(` is impossible, and a false "varying" only means the slower path.
 */
export function isRepeatableSql(sql: string): boolean {
  const tokens = tokenizeSql(sql);
  for (let i = 0; i < tokens.length; i += 1) {
    const token = tokens[i];
    if (token === undefined) continue;
    const word = token.kind === TokenKind.WORD ? token.text : token.kind === TokenKind.QUOTED_IDENTIFIER ? token.text.toUpperCase() : undefined;
    if (word === undefined) continue;
    if (CLOCK_KEYWORDS.has(word) && token.kind === TokenKind.WORD) return false;
    if (VARYING_FUNCTIONS.has(word) && tokens[i + 1]?.text === '(') return false;
  }
  return true;
}

/**
 * Statements proven fast, keyed by database, row cap and text, with the
 * child-measured run time; at most `capacity`, the oldest proof dropped first
 * (a dropped statement simply runs in a child once more and is proven again).
 */
export interface FastPathProof {
  /** The row cap the child ran it with (the proof holds for this cap only). */
  maxRows: number;
  /** The child's result was complete (not truncated): the statement's whole result fits the caps. */
  complete: boolean;
}

/**
 * Statements proven fast, by SQL text then database path (lookups on the
 * caller's own strings: nothing is concatenated per query). At most about
 * `capacity` proofs; past that the oldest texts are dropped first (a dropped
 * statement simply runs in a child once more and is proven again).
 */
export class FastPathTable {
  private readonly proven = new Map<string, Map<string, FastPathProof>>();
  private count = 0;

  constructor(private readonly capacity: number) {}

  /** The proof, or undefined when the statement must go to a child. */
  lookup(dbPath: string, sql: string, maxRows: number): FastPathProof | undefined {
    const proof = this.proven.get(sql)?.get(dbPath);
    return proof !== undefined && proof.maxRows === maxRows ? proof : undefined;
  }

  /** Record a child's successful run (replacing a proof for another row cap). */
  prove(dbPath: string, sql: string, proof: FastPathProof): void {
    let byDb = this.proven.get(sql);
    if (byDb === undefined) {
      byDb = new Map();
      this.proven.set(sql, byDb);
    }
    if (!byDb.has(dbPath)) this.count += 1;
    byDb.set(dbPath, proof);
    while (this.count > this.capacity) {
      const oldest = this.proven.entries().next();
      if (oldest.done === true) return;
      this.count -= oldest.value[1].size;
      this.proven.delete(oldest.value[0]);
    }
  }

  demote(dbPath: string, sql: string): void {
    const byDb = this.proven.get(sql);
    if (byDb?.delete(dbPath) === true) this.count -= 1;
  }

  get size(): number {
    return this.count;
  }
}
