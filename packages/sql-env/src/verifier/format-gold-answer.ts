import type { AnswerType, Cell } from '@sqlenv/protocol';

/** How SQL NULL is written in answers. */
export const NULL_TEXT = 'NULL';
/**
 * The canonical answer to a question whose gold query returns no rows (Spider
 * has such questions: "Which students have no pets?" on a database where all
 * have one). The verifier accepts it and a few spellings of "nothing"
 * (EMPTY_RESULT_ANSWERS); an empty string stays wrong.
 */
export const EMPTY_RESULT_ANSWER = 'none';
/** Answers (after unwrapping, lower-cased, trailing period dropped) that mean "no rows". */
export const EMPTY_RESULT_ANSWERS: ReadonlySet<string> = new Set([
  'none',
  '(none)',
  'no rows',
  '(no rows)',
  'no result',
  'no results',
  'empty',
  'empty result',
  'nothing',
  '[]',
  '0 rows',
  'n/a',
]);

/** Separator between the cells of one table row. */
export const TABLE_CELL_SEPARATOR = ' | ';

const NEWLINE_RE = /\r\n|\r|\n/g;

/**
 * One cell as answer text. Numbers use JavaScript's shortest round-trip
 * spelling ("0.1", "3.3333333333333335", "1e+21"), which parses back to the
 * same double: the faithful form the oracle submits.
 */
export function formatCell(cell: Cell | undefined): string {
  if (cell === null || cell === undefined) return NULL_TEXT;
  return typeof cell === 'number' ? String(cell) : cell;
}

// Inside a list or table, a blank text cell is written `""` so that it is not
// lost when the answer is split, and a newline becomes a space (newlines
// separate items; the verifier collapses whitespace, so nothing is lost).
function formatItem(cell: Cell | undefined): string {
  const text = formatCell(cell).replace(NEWLINE_RE, ' ');
  return text.trim() === '' ? '""' : text;
}

function formatTableCell(cell: Cell | undefined): string {
  // A literal pipe is escaped so that it is not read as a cell separator.
  return formatItem(cell).replaceAll('|', '\\|');
}

/**
 * The canonical answer text for gold rows (what the oracle submits and what
 * is stored as `gold_answer`):
 * - integer / float / string: the first cell (`"25"`, `"2.5"`, `"Paris"`, `"NULL"`);
 * - list: first cells joined with ", " — or one per line when any item holds
 *   a comma, so that the items can be split back unambiguously;
 * - table: one row per line, cells joined with " | ".
 * Zero rows give EMPTY_RESULT_ANSWER ("none").
 */
export function formatGoldAnswer(answerType: AnswerType, rows: Cell[][]): string {
  if (rows.length === 0) return EMPTY_RESULT_ANSWER;
  switch (answerType) {
    case 'integer':
    case 'float':
    case 'string': {
      const first = rows[0];
      return first === undefined ? '' : formatCell(first[0]);
    }
    case 'list': {
      const items = rows.map((row) => formatItem(row[0]));
      return items.join(items.some((item) => item.includes(',')) ? '\n' : ', ');
    }
    case 'table':
      return rows.map((row) => row.map(formatTableCell).join(TABLE_CELL_SEPARATOR)).join('\n');
  }
}
