import type { Cell } from '@sqlenv/protocol';

export interface RenderLimits {
  /** Rows shown at most; the rest are counted in a note. */
  maxRows: number;
  /** Characters of the whole rendered text at most, notes included. */
  maxChars: number;
}

export interface RenderInput {
  columns: readonly string[];
  rows: readonly (readonly Cell[])[];
  /** True when `rows` is itself a prefix of a larger result (the executor stopped early). */
  truncated: boolean;
}

const specialChars = /[\r\n|]/;

/** One cell as the agent sees it: NULL spelled out, line breaks and the separator kept from breaking the table. */
export function renderCell(cell: Cell): string {
  if (cell === null) return 'NULL';
  if (typeof cell === 'number') return String(cell);
  // Most cells need no escaping: one test is cheaper than two replaces on the hot path.
  return specialChars.test(cell) ? cell.replace(/\r?\n/g, '\\n').replace(/\|/g, '\\|') : cell;
}

/** Rows written the way the agent is told to write table answers: `a | b`, one per line. */
export function renderRows(rows: readonly (readonly Cell[])[]): string[] {
  return rows.map((row) => row.map(renderCell).join(' | '));
}

/**
 * A query result as a readable text table: a header line, then one line per row,
 * then a note when rows or characters were cut. The text never exceeds
 * `maxChars` (the original environment cut results at 2,000 characters).
 */
export function renderResult(result: RenderInput, limits: RenderLimits): string {
  const total = result.rows.length;
  if (total === 0) return result.columns.length > 0 ? `${result.columns.join(' | ')}\n(0 rows)` : '(0 rows)';
  const shown = result.rows.slice(0, limits.maxRows);
  const lines = [result.columns.join(' | '), ...renderRows(shown)];
  const counted = result.truncated ? `${total}+` : String(total);
  const rowNote = shown.length < total || result.truncated
    ? `(showing ${shown.length} of ${counted} rows)`
    : `(${total} ${total === 1 ? 'row' : 'rows'})`;
  return fitToChars(lines, rowNote, limits.maxChars);
}

/** Join lines plus a final note; when too long, drop whole lines (then cut the last one) to fit. */
function fitToChars(lines: readonly string[], note: string, maxChars: number): string {
  const full = `${lines.join('\n')}\n${note}`;
  if (full.length <= maxChars) return full;
  const cutNote = `... (output cut to ${maxChars} characters) ${note}`;
  const budget = maxChars - cutNote.length - 1;
  if (budget <= 0) return cutNote.slice(0, maxChars);
  let body = '';
  for (const line of lines) {
    const next = body.length === 0 ? line : `${body}\n${line}`;
    if (next.length > budget) {
      // Keep part of the line when nothing else would be shown (one huge cell or header).
      if (body.length === 0) body = line.slice(0, budget);
      break;
    }
    body = next;
  }
  return `${body}\n${cutNote}`;
}
