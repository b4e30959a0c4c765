import { tokenizeSql, TokenKind, type SqlToken } from '../sandbox/index.ts';

/**
 * Compatibility with SQLite's legacy double-quoted string literals.
 *
 * Spider's gold SQL (and LLMs trained on it) write `WHERE name = "Bob"`. Stock
 * SQLite accepts that: a double-quoted token that does not resolve to a column
 * is read as a string ("DQS", https://sqlite.org/quirks.html#dblquote). The
 * original SQLEnv ran on Python's sqlite3, which allows it; better-sqlite3 is
 * built with SQLITE_DQS=0 and offers no switch, so such queries fail with
 * `no such column: "Bob"` (a quarter of the Spider subset's gold queries).
 *
 * `singleQuoteStrings` reproduces the legacy rule on the text: a "..." token
 * becomes a '...' literal unless it names a table or column of the database,
 * an alias the query defines, or sits where only an identifier can (after
 * AS / FROM / JOIN, around a dot, before a parenthesis). The rewritten text
 * still goes through the sandbox's validator like any other query.
 */

/** Does an SQLite error look like the DQS refusal (a double-quoted word taken as a missing column)? */
export function isDoubleQuotedStringError(message: string): boolean {
  return /no such column: "/.test(message) || message.includes('should this be a string literal');
}

/** Words after which a quoted token can only be a name. */
const identifierContexts = new Set(['AS', 'FROM', 'JOIN', 'TABLE', 'INTO', 'UPDATE', 'INDEXED']);

function isNameContext(previous: SqlToken | undefined, next: SqlToken | undefined): boolean {
  if (previous?.text === '.' || next?.text === '.' || next?.text === '(') return true;
  return previous?.kind === TokenKind.WORD && identifierContexts.has(previous.text);
}

/**
 * `sql` with double-quoted tokens that cannot be names rewritten as
 * single-quoted string literals. `knownNames` holds the database's table and
 * column names, lower-cased. Returns `sql` itself when nothing changes.
 */
export function singleQuoteStrings(sql: string, knownNames: ReadonlySet<string>): string {
  if (!sql.includes('"')) return sql;
  const tokens = tokenizeSql(sql);
  const aliases = new Set<string>();
  tokens.forEach((token, i) => {
    if (token.kind === TokenKind.QUOTED_IDENTIFIER && tokens[i - 1]?.kind === TokenKind.WORD && tokens[i - 1]?.text === 'AS') aliases.add(token.text.toLowerCase());
  });
  let out = '';
  let copiedUpTo = 0;
  tokens.forEach((token, i) => {
    if (token.kind !== TokenKind.QUOTED_IDENTIFIER || token.unterminated === true || sql[token.start] !== '"') return;
    const name = token.text.toLowerCase();
    if (knownNames.has(name) || aliases.has(name) || isNameContext(tokens[i - 1], tokens[i + 1])) return;
    out += `${sql.slice(copiedUpTo, token.start)}'${token.text.replaceAll("'", "''")}'`;
    copiedUpTo = token.end;
  });
  return copiedUpTo === 0 ? sql : out + sql.slice(copiedUpTo);
}
