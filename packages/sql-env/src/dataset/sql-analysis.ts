import { Difficulty } from '@sqlenv/protocol';
import { tokenizeSql, TokenKind, type SqlToken } from '../sandbox/index.ts';

/**
 * Light-weight SQL analysis for dataset records: which tables a gold query reads
 * and how nested it is. Not a parser: the sandbox's tokenizer (SQLite's quoting
 * rules) is enough to find identifiers after FROM / JOIN without being fooled
 * by string literals or comments.
 */
type Token = SqlToken;

// WORD tokens are upper-cased by the tokenizer; table names are compared case-insensitively anyway.
const isWord = (token: Token | undefined, word: string): boolean => token !== undefined && token.kind === TokenKind.WORD && token.text === word;

const isIdentifier = (token: Token | undefined): token is Token =>
  token !== undefined && (token.kind === TokenKind.WORD || token.kind === TokenKind.QUOTED_IDENTIFIER);

/** Words that end a FROM list item, so they are never mistaken for an alias. */
const clauseWords = new Set([
  'WHERE', 'GROUP', 'ORDER', 'HAVING', 'LIMIT', 'UNION', 'INTERSECT', 'EXCEPT', 'JOIN', 'INNER', 'LEFT',
  'RIGHT', 'FULL', 'CROSS', 'NATURAL', 'OUTER', 'ON', 'USING', 'WINDOW', 'AS', 'OFFSET',
]);

/**
 * Table references of a query: the first identifier of every FROM-list item and
 * every JOIN target (a `schema.table` reference yields `table`). Subqueries in a
 * FROM list are skipped here: their own FROM is visited when the scan reaches it.
 */
function tableReferences(tokens: readonly Token[]): string[] {
  const names: string[] = [];
  const readName = (at: number): number => {
    const first = tokens[at];
    if (!isIdentifier(first)) return at;
    if (tokens[at + 1]?.text === '.' && isIdentifier(tokens[at + 2])) {
      names.push((tokens[at + 2] as Token).text);
      return at + 3;
    }
    names.push(first.text);
    return at + 1;
  };
  for (let i = 0; i < tokens.length; i += 1) {
    if (isWord(tokens[i], 'JOIN')) {
      readName(i + 1);
    } else if (isWord(tokens[i], 'FROM')) {
      // FROM a [AS] x, b y, (subquery) z ...
      let at = i + 1;
      for (;;) {
        if (tokens[at]?.text === '(') break;
        at = readName(at);
        if (isWord(tokens[at], 'AS')) at += 2;
        else if (isIdentifier(tokens[at]) && !clauseWords.has((tokens[at] as Token).text)) at += 1;
        if (tokens[at]?.text !== ',') break;
        at += 1;
      }
    }
  }
  return names;
}

/**
 * Real table names (the database's spelling) that `sql` reads, in order of first
 * appearance. Matching is case-insensitive; references to unknown names (CTE
 * names, typos) are left out.
 */
export function tablesInvolved(sql: string, realTableNames: readonly string[]): string[] {
  const byLowerName = new Map(realTableNames.map((name) => [name.toLowerCase(), name]));
  const found = new Set<string>();
  for (const reference of tableReferences(tokenizeSql(sql))) {
    const real = byLowerName.get(reference.toLowerCase());
    if (real !== undefined) found.add(real);
  }
  return [...found];
}

/** SELECT keywords beyond the first: nested subqueries plus UNION / INTERSECT / EXCEPT branches. */
export function extraSelectCount(sql: string): number {
  const selects = tokenizeSql(sql).filter((token) => isWord(token, 'SELECT')).length;
  return Math.max(0, selects - 1);
}

/**
 * Difficulty from the tables a query touches and how nested it is
 * (reference: "easy 1–2 tables, medium 2–3, hard 4+", made precise here):
 * - easy:   at most 2 tables and a single flat SELECT;
 * - hard:   4+ tables, or 2+ extra SELECTs (nested / set operations), or 3 tables with any extra SELECT;
 * - medium: everything in between (3 tables flat, or 1–2 tables with one extra SELECT).
 */
export function deriveDifficulty(tableCount: number, extraSelects: number): Difficulty {
  if (tableCount <= 2 && extraSelects === 0) return Difficulty.EASY;
  if (tableCount >= 4 || extraSelects >= 2 || (tableCount >= 3 && extraSelects >= 1)) return Difficulty.HARD;
  return Difficulty.MEDIUM;
}
