/** The three actions that earn dense reward (ANSWER is terminal-only). */
export type DenseActionType = 'DESCRIBE' | 'SAMPLE' | 'QUERY';

const CLOSING_QUOTE: Readonly<Record<string, string>> = { "'": "'", '"': '"', '`': '`', '[': ']' };

const QUOTE_OPENER_RE = /['"`[]/g;
const SPACES_RE = /\s+/g;
// Whitespace next to these carries no meaning in SQL, so "a=1" and "a = 1" fold together.
const SPACE_BY_PUNCTUATION_RE = / ?([(),;=<>!+\-*/|%]) ?/g;

/** One stretch of SQL outside quotes: spaces collapsed, case folded, spaces by punctuation dropped. */
function foldUnquoted(text: string, atStart: boolean, atEnd: boolean): string {
  let folded = text.replace(SPACES_RE, ' ').toLowerCase().replace(SPACE_BY_PUNCTUATION_RE, '$1');
  if (atStart) folded = folded.trimStart();
  if (atEnd) folded = folded.trimEnd();
  return folded;
}

/**
 * SQL folded for repeat detection: case-folded and whitespace-collapsed
 * OUTSIDE quoted strings and identifiers (so `name = 'Bob'` and
 * `name = 'bob'` stay different queries), spaces next to punctuation dropped,
 * trailing semicolons removed. Not a parser: two different spellings of the
 * same query (aliases, reordered clauses) still count as different. Quoted
 * stretches ('...', "...", `...`, [...]; an unterminated one runs to the end)
 * are copied as they are; the text between them is folded with native string
 * passes (this runs on every step).
 */
export function normaliseSql(sql: string): string {
  let out = '';
  let at = 0;
  for (;;) {
    QUOTE_OPENER_RE.lastIndex = at;
    const opener = QUOTE_OPENER_RE.exec(sql);
    const quoteAt = opener === null ? sql.length : opener.index;
    out += foldUnquoted(sql.slice(at, quoteAt), out.length === 0, opener === null);
    if (opener === null) break;
    const close = sql.indexOf(CLOSING_QUOTE[opener[0]] as string, quoteAt + 1);
    at = close === -1 ? sql.length : close + 1;
    out += sql.slice(quoteAt, at);
  }
  // A scan, not `/;+$/`: the regex retries from every `;` of a long run (quadratic; seconds on 100 KB).
  let end = out.length;
  while (end > 0 && out.charCodeAt(end - 1) === 59 /* ; */) end -= 1;
  return out.slice(0, end);
}

/** A table name folded for repeat detection: trimmed, one quote/bracket pair removed, case-folded (SQLite names are case-insensitive). */
export function normaliseTableName(name: string): string {
  const trimmed = name.trim();
  const first = trimmed[0];
  const closing = first === undefined ? undefined : CLOSING_QUOTE[first];
  const bare = closing !== undefined && trimmed.length >= 2 && trimmed.endsWith(closing) ? trimmed.slice(1, -1) : trimmed;
  return bare.trim().toLowerCase();
}

/** normaliseSql of recent QUERY texts: GRPO plays each question many times, and agents repeat queries. */
const foldedSql = new Map<string, string>();
const FOLDED_SQL_ENTRIES = 4_096;

function normaliseSqlMemo(sql: string): string {
  let folded = foldedSql.get(sql);
  if (folded === undefined) {
    folded = normaliseSql(sql);
    if (foldedSql.size >= FOLDED_SQL_ENTRIES) foldedSql.clear();
    foldedSql.set(sql, folded);
  }
  return folded;
}

/**
 * What "the same action" means for the new-information bonus and the repeat
 * penalty: the action type plus its folded argument. DESCRIBE t and SAMPLE t
 * are different keys (they reveal different things).
 */
export function actionKey(actionType: DenseActionType, argument: string): string {
  return `${actionType}:${actionType === 'QUERY' ? normaliseSqlMemo(argument) : normaliseTableName(argument)}`;
}
