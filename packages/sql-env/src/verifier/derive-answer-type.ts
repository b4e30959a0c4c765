import type { AnswerType, Cell } from '@sqlenv/protocol';

/**
 * The answer type of a gold result (docs/architecture.md, "The environment", "Answer
 * verifier"), decided by its shape and, for one cell, by the cell's SQLite type:
 * - several columns → `table`, even with a single row ("name | age" is one
 *   answer with two parts, not a scalar);
 * - one column, exactly one row: a number that is integer-valued → `integer`
 *   (SQLite REAL 25.0 reaches JavaScript as 25 and is treated the same),
 *   another number → `float`, text → `string`, NULL → `string` (answered "NULL");
 * - one column with zero or several rows → `list`.
 * Numeric TEXT ("25", "007") stays `string`: the column's type says it is
 * text (zip codes, phone numbers, ids with leading zeros). The verifier still
 * accepts "25.0" for a gold text "25" because canonical numeric text is also
 * compared numerically (see matchCell).
 */
export function deriveAnswerType(columns: string[], rows: Cell[][]): AnswerType {
  const width = Math.max(columns.length, rows[0]?.length ?? 0);
  if (width >= 2) return 'table';
  if (rows.length !== 1) return 'list';
  const cell = rows[0]?.[0];
  if (typeof cell === 'number') return Number.isInteger(cell) ? 'integer' : 'float';
  return 'string';
}
