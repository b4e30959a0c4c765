import { AppError, ErrorCode } from '@sqlenv/shared/app-error';
import { TokenKind, tokenizeSql, type SqlToken } from './sql-tokenizer.ts';

/**
 * First line of defence of the sandbox: a lexical check that the text is ONE
 * read-only query (SELECT, VALUES, or WITH ... SELECT). The second line is
 * better-sqlite3's own `stmt.reader` / `stmt.readonly` after prepare (see
 * query-runner.ts), and the third is the connection itself (read-only file,
 * `query_only`, extension loading never enabled).
 *
 * Only the leading verb decides what a statement does in SQLite (no writes
 * nest inside a SELECT), so keywords later in the statement are not scanned:
 * `SELECT replace(name, 'a', 'b')` and a column called "drop" stay legal.
 * Refused functions are looked for everywhere, because a SELECT can call
 * them, but only where a name is USED as a function: before `(` (a call, or a
 * table-valued function with arguments) or in a FROM clause's table position
 * (an eponymous virtual table such as `FROM pragma_database_list`). The same
 * name as an alias or a column (`SELECT 1 AS edit`, `t AS pragma_city`) runs.
 */

const ALLOWED = 'only a single read-only SELECT (or WITH ... SELECT) query may run';

/** Why a leading keyword is refused, for the rejection message. */
const refusedVerbs: Readonly<Record<string, string>> = {
  INSERT: 'a write',
  UPDATE: 'a write',
  DELETE: 'a write',
  REPLACE: 'a write',
  CREATE: 'a schema change',
  DROP: 'a schema change',
  ALTER: 'a schema change',
  ATTACH: 'opens another database',
  DETACH: 'changes the attached databases',
  PRAGMA: 'reads or changes connection settings',
  VACUUM: 'rewrites the database',
  REINDEX: 'rewrites indexes',
  ANALYZE: 'writes statistics tables',
  BEGIN: 'transaction control',
  COMMIT: 'transaction control',
  END: 'transaction control',
  ROLLBACK: 'transaction control',
  SAVEPOINT: 'transaction control',
  RELEASE: 'transaction control',
  EXPLAIN: 'shows the query plan, not data',
};

function refusedVerb(verb: string, context = ''): string {
  const why = refusedVerbs[verb];
  return `${verb}${context} is not allowed${why === undefined ? '' : ` (${why})`}; ${ALLOWED}`;
}

/** Verbs that may follow a WITH clause (or lead a statement) and only read. */
const readVerbs = new Set(['SELECT', 'VALUES']);
/** Verbs a WITH clause can lead into; the first one at depth 0 is the statement's verb. */
const withTargets = new Set(['SELECT', 'VALUES', 'INSERT', 'UPDATE', 'DELETE', 'REPLACE']);

/**
 * SQL functions with effects outside the query, refused wherever they appear
 * (as a bare or quoted name). Most are not compiled into better-sqlite3
 * (readfile & co. belong to the sqlite3 shell), but a future build might
 * add them; `load_extension` exists and is also disabled on the connection.
 */
const refusedFunctions = new Set(['load_extension', 'readfile', 'writefile', 'edit', 'fsdir', 'zipfile', 'sqlar_compress', 'sqlar_uncompress', 'fts3_tokenizer']);

export interface ValidatedSql {
  /** The text of the one statement, without a trailing `;` or comments: what to prepare. */
  statement: string;
  /** The statement's verb: SELECT or VALUES. */
  verb: string;
}

export interface ValidateSqlOptions {
  /** Longest SQL text accepted, in UTF-16 characters. */
  maxSqlChars: number;
}

function reject(message: string, details?: Record<string, unknown>): never {
  throw new AppError(ErrorCode.SQL_REJECTED, message, details === undefined ? {} : { details });
}

const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Split the token stream on top-level `;` into non-empty statements. */
function splitStatements(tokens: readonly SqlToken[]): SqlToken[][] {
  const statements: SqlToken[][] = [];
  let current: SqlToken[] = [];
  for (const token of tokens) {
    if (token.kind === TokenKind.PUNCT && token.text === ';') {
      if (current.length > 0) statements.push(current);
      current = [];
    } else {
      current.push(token);
    }
  }
  if (current.length > 0) statements.push(current);
  return statements;
}

/** The verb a `WITH ...` statement leads into: the first write/read verb at parenthesis depth 0. */
function verbAfterWith(statement: readonly SqlToken[]): string | undefined {
  let depth = 0;
  for (const token of statement.slice(1)) {
    if (token.kind === TokenKind.PUNCT) {
      if (token.text === '(') depth += 1;
      else if (token.text === ')') depth -= 1;
    } else if (depth === 0 && token.kind === TokenKind.WORD && withTargets.has(token.text)) {
      return token.text;
    }
  }
  return undefined;
}

/**
 * Keywords that end a FROM clause at their parenthesis depth. ON and USING do
 * not: `FROM a JOIN b ON x = y, c` goes on listing tables after the comma.
 */
const fromClauseEnds = new Set(['WHERE', 'GROUP', 'HAVING', 'WINDOW', 'ORDER', 'LIMIT', 'UNION', 'EXCEPT', 'INTERSECT', 'SELECT', 'VALUES', 'RETURNING']);

function isName(token: SqlToken | undefined): token is SqlToken {
  return token !== undefined && (token.kind === TokenKind.WORD || token.kind === TokenKind.QUOTED_IDENTIFIER);
}

function isPunct(token: SqlToken | undefined, text: string): boolean {
  return token?.kind === TokenKind.PUNCT && token.text === text;
}

function refusedUse(name: string): string | undefined {
  if (refusedFunctions.has(name)) return `the function ${name}() is not allowed; ${ALLOWED}`;
  // Table-valued PRAGMA functions (pragma_table_info...) give PRAGMA's powers to a SELECT.
  if (name.startsWith('pragma_')) return `PRAGMA functions (${name}) are not allowed; ${ALLOWED}`;
  return undefined;
}

/** Keywords after which a bare name is a table: `FROM t`, `JOIN t`, `x IN t`. */
const tableKeywords = new Set(['FROM', 'JOIN', 'IN']);
/** Keywords after which `(` opens a parenthesised table list (`FROM (a JOIN b)`); `IN (` opens values or a subquery. */
const tableListKeywords = new Set(['FROM', 'JOIN']);

/**
 * Refuse uses of the refused functions: a name followed by `(` (a call, or a
 * table-valued function with arguments), or a name where SQLite reads a table
 * (after FROM, JOIN or IN, after a comma or an opening parenthesis of a FROM
 * clause's table list, possibly as `schema.name`), which resolves to an
 * eponymous virtual table when no real table has that name. Conservative where
 * the lexer cannot tell: a CTE or real table with such a name is refused too.
 * Anything else (an alias, a column, a type name, a string) is only a name.
 */
function checkFunctions(statement: readonly SqlToken[]): void {
  // Per parenthesis depth: inside a FROM clause's table list? Opened in a table position?
  const inFrom: boolean[] = [false];
  const opensTable: boolean[] = [false];
  let depth = 0;
  const tablePosition = (index: number, keywords: ReadonlySet<string> = tableKeywords): boolean => {
    const previous = statement[index - 1];
    if (isPunct(previous, '.')) return isName(statement[index - 2]) && tablePosition(index - 2, keywords);
    if (isPunct(previous, '(')) return opensTable[depth] === true;
    if (previous?.kind === TokenKind.WORD && keywords.has(previous.text)) return true;
    return isPunct(previous, ',') && inFrom[depth] === true;
  };
  statement.forEach((token, index) => {
    if (isPunct(token, '(')) {
      const table = tablePosition(index, tableListKeywords);
      depth += 1;
      inFrom[depth] = table;
      opensTable[depth] = table;
    } else if (isPunct(token, ')')) {
      depth = Math.max(0, depth - 1);
    } else if (token.kind === TokenKind.WORD && token.text === 'FROM') {
      inFrom[depth] = true;
    } else if (token.kind === TokenKind.WORD && fromClauseEnds.has(token.text)) {
      inFrom[depth] = false;
    }
    if (!isName(token)) return;
    const name = token.text.toLowerCase();
    const message = refusedUse(name);
    if (message === undefined) return;
    if (isPunct(statement[index + 1], '(') || tablePosition(index)) reject(message, { refused: name });
  });
}

/**
 * Check that `sql` is exactly one read-only query, or throw
 * AppError(SQL_REJECTED) with a message naming what was refused (or
 * SQL_ERROR with SQLite's "syntax error" wording when the first word starts
 * no SQL statement at all, e.g. a typo).
 */
export function validateSql(sql: string, options: ValidateSqlOptions): ValidatedSql {
  if (sql.length > options.maxSqlChars) reject(`SQL is too long (${sql.length} characters; the limit is ${options.maxSqlChars})`);
  if (sql.includes('\0')) reject('SQL must not contain NUL characters');
  if (loneSurrogate.test(sql)) reject('SQL contains invalid Unicode (an unpaired surrogate)');
  const statements = splitStatements(tokenizeSql(sql));
  const [statement] = statements;
  if (statement === undefined) reject(`empty SQL: ${ALLOWED}`);
  if (statements.length > 1) reject(`multiple statements are not allowed (found ${statements.length}); ${ALLOWED}`);
  const first = statement[0] as SqlToken;
  const last = statement[statement.length - 1] as SqlToken;
  if (first.kind !== TokenKind.WORD) reject(`SQL must start with SELECT or WITH, not "${sql.slice(first.start, Math.min(first.end, first.start + 40))}"; ${ALLOWED}`);
  let verb = first.text;
  if (verb === 'WITH') {
    const target = verbAfterWith(statement);
    if (target === undefined) reject(`a WITH clause must lead into a SELECT; ${ALLOWED}`);
    if (!readVerbs.has(target)) reject(refusedVerb(target, ' after WITH'), { refused: target });
    verb = target;
  } else if (!readVerbs.has(verb)) {
    // A word that starts no SQL statement at all (a typo: SELEC) is SQLite's
    // syntax error, reported the way SQLite reports it, not a refusal.
    if (refusedVerbs[verb] === undefined) {
      throw new AppError(ErrorCode.SQL_ERROR, `near "${sql.slice(first.start, first.end)}": syntax error; ${ALLOWED}`);
    }
    reject(refusedVerb(verb), { refused: verb });
  }
  checkFunctions(statement);
  return { statement: sql.slice(first.start, last.end), verb };
}
