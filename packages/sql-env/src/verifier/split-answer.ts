import { normaliseCellText } from './match-cell.ts';

const LINE_RE = /\r\n|\r|\n/;
const BULLET_RE = /^(?:[-*•+]|\d+[.)])\s+/;
const LEADING_AND_RE = /^and\s+/i;
const MARKDOWN_RULE_RE = /^:?-{3,}:?$/;

function lines(text: string): string[] {
  return text
    .split(LINE_RE)
    .map((line) => line.trim())
    .filter((line) => line !== '');
}

function splitCommas(items: string[]): string[] {
  return items.flatMap((item) => item.split(',')).map((piece) => piece.trim()).filter((piece) => piece !== '');
}

const AND_RE = /\sand\s/gi;

/**
 * Comma-separated readings with the last item split in two at an " and ":
 * "a, b and c" (no Oxford comma) and "a and b" read as lists. The first and
 * the last " and " are both tried, so an item that itself holds one is read
 * either way ("Sales, Marketing and Research and Development"); the plain
 * comma split is still tried too. One linear scan.
 */
function splitFinalAnd(items: readonly string[]): string[][] {
  const last = items[items.length - 1];
  if (last === undefined) return [];
  const positions: number[] = [];
  AND_RE.lastIndex = 0;
  for (let match = AND_RE.exec(last); match !== null; match = AND_RE.exec(last)) {
    if (positions.length < 2) positions.push(match.index);
    else positions[1] = match.index;
    // Step one past the match start so that an overlapping " and and " is found.
    AND_RE.lastIndex = match.index + 1;
  }
  const readings: string[][] = [];
  for (const at of positions) {
    const before = last.slice(0, at).trim();
    const after = last.slice(at + 5).trim();
    if (before !== '' && after !== '') readings.push([...items.slice(0, -1), before, after]);
  }
  return readings;
}

function addUnique(candidates: string[][], seen: Set<string>, items: string[]): void {
  const signature = items.join('\u0000');
  if (seen.has(signature)) return;
  seen.add(signature);
  candidates.push(items);
}

/**
 * The ways a list answer can be read, most literal first: one item per line;
 * the same without bullet markers ("- a", "1. a"); either split on commas too;
 * then without an Oxford "and" ("a, b, and c"), or with the last item split at
 * its first or last " and " ("a, b and c", "a and b"). A JSON-style "[a, b]" is read
 * both with and without its brackets. The verifier accepts the answer when ANY
 * reading equals the gold multiset, so an item that legitimately holds a
 * comma is read correctly from a one-per-line answer.
 */
export function listReadings(text: string): string[][] {
  const bodies = [text];
  const trimmed = text.trim();
  if (trimmed.startsWith('[') && trimmed.endsWith(']')) bodies.push(trimmed.slice(1, -1));
  const candidates: string[][] = [];
  const seen = new Set<string>();
  for (const body of bodies) {
    const perLine = lines(body);
    const unbulleted = perLine.map((line) => line.replace(BULLET_RE, ''));
    addUnique(candidates, seen, perLine);
    addUnique(candidates, seen, unbulleted);
    for (const perComma of [splitCommas(perLine), splitCommas(unbulleted)]) {
      addUnique(candidates, seen, perComma);
      addUnique(candidates, seen, perComma.map((item) => item.replace(LEADING_AND_RE, '')));
      for (const reading of splitFinalAnd(perComma)) addUnique(candidates, seen, reading);
    }
  }
  return candidates;
}

/** A list stored as text (gold_answer without gold_rows): one item per line, or comma-separated on one line. */
export function splitGoldList(text: string): string[] {
  const perLine = lines(text);
  return perLine.length > 1 ? perLine : splitCommas(perLine);
}

/** Splits a row on unescaped pipes; `\|` is a literal pipe, any other backslash is itself. */
function splitPipes(line: string): { cells: string[]; leadingPipe: boolean; trailingPipe: boolean } {
  if (!line.includes('\\')) {
    // No escapes: the native split is equivalent and much faster on long tables.
    return { cells: line.split('|'), leadingPipe: line.startsWith('|'), trailingPipe: line.endsWith('|') };
  }
  const cells: string[] = [];
  let current = '';
  let trailingPipe = false;
  for (let i = 0; i < line.length; i += 1) {
    const char = line[i];
    if (char === '\\' && line[i + 1] === '|') {
      current += '|';
      i += 1;
      trailingPipe = false;
    } else if (char === '|') {
      cells.push(current);
      current = '';
      trailingPipe = true;
    } else {
      current += char;
      trailingPipe = false;
    }
  }
  cells.push(current);
  return { cells, leadingPipe: line.startsWith('|'), trailingPipe };
}

function hasUnescapedPipe(line: string): boolean {
  return /(?:^|[^\\])\|/.test(line);
}

/**
 * One answer line as table cells: `a | b` (markdown's outer pipes dropped),
 * else tab-separated, else comma-separated when the row needs several cells.
 */
export function splitTableRow(line: string, width: number): string[] {
  if (hasUnescapedPipe(line)) {
    const { cells, leadingPipe, trailingPipe } = splitPipes(line);
    if (trailingPipe && cells.length > 1) cells.pop();
    if (leadingPipe && cells.length > 1) cells.shift();
    return cells.map((cell) => cell.trim());
  }
  if (line.includes('\t')) return line.split('\t').map((cell) => cell.trim());
  if (width > 1) return line.split(',').map((cell) => cell.trim());
  return [line.replaceAll('\\|', '|').trim()];
}

function isMarkdownRule(row: string[]): boolean {
  return row.length > 0 && row.every((cell) => MARKDOWN_RULE_RE.test(cell));
}

function isHeader(row: string[], columns: readonly string[]): boolean {
  return (
    columns.length > 0 &&
    row.length === columns.length &&
    row.every((cell, index) => normaliseCellText(cell) === normaliseCellText(columns[index] ?? ''))
  );
}

/**
 * The ways a table answer can be read: every non-blank line a row; and, for
 * markdown tables, without the `|---|---|` rule and without a header row that
 * repeats the gold column names.
 */
export function tableReadings(text: string, width: number, columns: readonly string[]): string[][][] {
  const rows = lines(text).map((line) => splitTableRow(line, width));
  const withoutRules = rows.filter((row) => !isMarkdownRule(row));
  const first = withoutRules[0];
  const withoutHeader = first !== undefined && isHeader(first, columns) ? withoutRules.slice(1) : withoutRules;
  return withoutHeader.length === rows.length ? [rows] : [rows, withoutHeader];
}
