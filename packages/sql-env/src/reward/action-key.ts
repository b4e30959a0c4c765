/** The three actions that earn dense reward (ANSWER is terminal-only). */
export type DenseActionType = 'DESCRIBE' | 'SAMPLE' | 'QUERY';

// Whitespace next to these carries no meaning in SQL, so "a=1" and "a = 1" fold together.
const PUNCTUATION = new Set(['(', ')', ',', ';', '=', '<', '>', '!', '+', '-', '*', '/', '|', '%']);
const CLOSING_QUOTE: Readonly<Record<string, string>> = { "'": "'", '"': '"', '`': '`', '[': ']' };

function isSpace(char: string): boolean {
  return char === ' ' || char === '\t' || char === '\n' || char === '\r' || char === '\f' || char === '\v';
}

/**
 * SQL folded for repeat detection: case-folded and whitespace-collapsed
 * OUTSIDE quoted strings and identifiers (so `name = 'Bob'` and
 * `name = 'bob'` stay different queries), spaces next to punctuation dropped,
 * trailing semicolons removed. Not a parser: two different spellings of the
 * same query (aliases, reordered clauses) still count as different.
 */
const QUOTE_RE = /['"`[]/;
const SPACES_RE = /\s+/g;
const SPACE_BY_PUNCTUATION_RE = / ?([(),;=<>!+\-*/|%]) ?/g;

export function normaliseSql(sql: string): string {
  // Fast path for the common query without quotes: three native passes instead of a JS loop.
  if (!QUOTE_RE.test(sql)) {
    return sql.trim().replace(SPACES_RE, ' ').toLowerCase().replace(SPACE_BY_PUNCTUATION_RE, '$1').replace(/;+$/, '');
  }
  let out = '';
  let pendingSpace = false;
  let quote: string | undefined;
  for (const char of sql) {
    if (quote !== undefined) {
      out += char;
      if (char === quote) quote = undefined;
      continue;
    }
    if (isSpace(char)) {
      pendingSpace = out.length > 0;
      continue;
    }
    if (pendingSpace && !PUNCTUATION.has(char) && !PUNCTUATION.has(out[out.length - 1] ?? '')) out += ' ';
    pendingSpace = false;
    const closing = CLOSING_QUOTE[char];
    if (closing !== undefined) quote = closing;
    out += closing === undefined ? char.toLowerCase() : char;
  }
  return out.replace(/;+$/, '');
}

/** A table name folded for repeat detection: trimmed, one quote/bracket pair removed, case-folded (SQLite names are case-insensitive). */
export function normaliseTableName(name: string): string {
  const trimmed = name.trim();
  const first = trimmed[0];
  const closing = first === undefined ? undefined : CLOSING_QUOTE[first];
  const bare = closing !== undefined && trimmed.length >= 2 && trimmed.endsWith(closing) ? trimmed.slice(1, -1) : trimmed;
  return bare.trim().toLowerCase();
}

/**
 * What "the same action" means for the new-information bonus and the repeat
 * penalty: the action type plus its folded argument. DESCRIBE t and SAMPLE t
 * are different keys (they reveal different things).
 */
export function actionKey(actionType: DenseActionType, argument: string): string {
  return `${actionType}:${actionType === 'QUERY' ? normaliseSql(argument) : normaliseTableName(argument)}`;
}
