/**
 * A small SQLite tokenizer: just enough lexical knowledge to find statement
 * boundaries and keywords without being fooled by comments, string literals
 * or quoted identifiers. It mirrors SQLite's own lexer (tokenize.c) for the
 * constructs that can hide text:
 *   - `-- ...` to end of line and `/* ... *\/` (unterminated runs to the end)
 *   - '...' strings with '' as the escaped quote
 *   - "..." and `...` identifiers with doubled quotes, [...] identifiers
 * Everything else becomes a word, a number or a one-character punctuation
 * token. Comments and whitespace produce no tokens.
 */

export const TokenKind = {
  /** A bare word: keyword or unquoted identifier (`text` is upper-cased). */
  WORD: 'word',
  /** A quoted identifier: "x", [x] or `x` (`text` is the unquoted name). */
  QUOTED_IDENTIFIER: 'quoted-identifier',
  /** A '...' string literal (`text` is the raw literal, quotes included). */
  STRING: 'string',
  /** A numeric literal. */
  NUMBER: 'number',
  /** Any other single character: ; ( ) , . * = ... */
  PUNCT: 'punct',
} as const;
export type TokenKind = (typeof TokenKind)[keyof typeof TokenKind];

export interface SqlToken {
  kind: TokenKind;
  text: string;
  /** Offset of the first character in the source (UTF-16 units). */
  start: number;
  /** Offset just past the last character. */
  end: number;
  /** True when a string literal or quoted identifier has no closing quote. */
  unterminated?: boolean;
}

function isSpace(code: number): boolean {
  return code === 32 || (code >= 9 && code <= 13);
}

function isDigit(code: number): boolean {
  return code >= 48 && code <= 57;
}

/** SQLite treats every non-ASCII character as an identifier character. */
function isIdentifierStart(code: number): boolean {
  return (code >= 65 && code <= 90) || (code >= 97 && code <= 122) || code === 95 || code > 127;
}

function isIdentifierPart(code: number): boolean {
  return isIdentifierStart(code) || isDigit(code) || code === 36; /* $ */
}

/** Scan a quoted token that ends at `close`; a doubled `close` is an escaped quote (unless `close` is ']'). */
function scanQuoted(sql: string, start: number, close: string): { end: number; unterminated: boolean } {
  let i = start + 1;
  for (;;) {
    const at = sql.indexOf(close, i);
    if (at === -1) return { end: sql.length, unterminated: true };
    if (close !== ']' && sql[at + 1] === close) {
      i = at + 2;
      continue;
    }
    return { end: at + 1, unterminated: false };
  }
}

function unquote(raw: string, close: string): string {
  const body = raw.slice(1, raw.endsWith(close) ? -1 : undefined);
  return close === ']' ? body : body.split(close + close).join(close);
}

export function tokenizeSql(sql: string): SqlToken[] {
  const tokens: SqlToken[] = [];
  let i = 0;
  while (i < sql.length) {
    const code = sql.charCodeAt(i);
    const ch = sql[i] as string;
    if (isSpace(code)) {
      i += 1;
    } else if (ch === '-' && sql[i + 1] === '-') {
      const eol = sql.indexOf('\n', i + 2);
      i = eol === -1 ? sql.length : eol + 1;
    } else if (ch === '/' && sql[i + 1] === '*') {
      const close = sql.indexOf('*/', i + 2);
      i = close === -1 ? sql.length : close + 2;
    } else if (ch === "'") {
      const { end, unterminated } = scanQuoted(sql, i, "'");
      tokens.push({ kind: TokenKind.STRING, text: sql.slice(i, end), start: i, end, unterminated });
      i = end;
    } else if (ch === '"' || ch === '`' || ch === '[') {
      const close = ch === '[' ? ']' : ch;
      const { end, unterminated } = scanQuoted(sql, i, close);
      tokens.push({ kind: TokenKind.QUOTED_IDENTIFIER, text: unquote(sql.slice(i, end), close), start: i, end, unterminated });
      i = end;
    } else if (isDigit(code) || (ch === '.' && isDigit(sql.charCodeAt(i + 1)))) {
      // Loose on purpose: a number swallows following letters/digits/dots
      // (1e5, 0x1F, 1.5e-3 via the sign below); SQLite reports malformed ones.
      let j = i + 1;
      while (j < sql.length) {
        const c = sql.charCodeAt(j);
        const prev = sql.charCodeAt(j - 1);
        const exponentSign = (c === 43 || c === 45) && (prev === 69 || prev === 101) && !sql.startsWith('0x', i);
        if (isIdentifierPart(c) || c === 46 || exponentSign) j += 1;
        else break;
      }
      tokens.push({ kind: TokenKind.NUMBER, text: sql.slice(i, j), start: i, end: j });
      i = j;
    } else if (isIdentifierStart(code)) {
      let j = i + 1;
      while (j < sql.length && isIdentifierPart(sql.charCodeAt(j))) j += 1;
      tokens.push({ kind: TokenKind.WORD, text: sql.slice(i, j).toUpperCase(), start: i, end: j });
      i = j;
    } else {
      tokens.push({ kind: TokenKind.PUNCT, text: ch, start: i, end: i + 1 });
      i += 1;
    }
  }
  return tokens;
}
