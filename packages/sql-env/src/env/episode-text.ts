import type { DatabaseInfo, DatabaseTable } from '../dataset/dataset.ts';
import { renderResult } from './render-result.ts';

/**
 * The model-visible texts of an episode. Formats are part of the contract with
 * policies: schema_info has one table per line as `- <name>`, followed by
 * ` (<n> rows): <columns>` once the table was described.
 */

function columnList(table: DatabaseTable): string {
  return table.columns.map((c) => [c.name, c.type, c.primaryKey ? 'PK' : ''].filter((part) => part !== '').join(' ')).join(', ');
}

// Tables never change (databases are read-only), so their texts are rendered
// once and shared by every episode; weak keys let a dropped dataset go.
const describedLines = new WeakMap<DatabaseTable, string>();
const describeTexts = new WeakMap<DatabaseTable, { maxChars: number; text: string }>();

/** Table names, plus columns of the described tables (`described` holds real names). */
export function renderSchemaInfo(db: DatabaseInfo, described: ReadonlySet<string>): string {
  let text = 'Tables:';
  for (const table of db.tables) {
    if (!described.has(table.name)) {
      text += `\n- ${table.name}`;
      continue;
    }
    let line = describedLines.get(table);
    if (line === undefined) {
      line = `- ${table.name} (${table.rowCount} rows): ${columnList(table)}`;
      describedLines.set(table, line);
    }
    text += `\n${line}`;
  }
  return text;
}

/** DESCRIBE's result: the row count, then one line per column. */
export function renderDescribe(table: DatabaseTable, maxChars: number): string {
  const cached = describeTexts.get(table);
  if (cached?.maxChars === maxChars) return cached.text;
  const body = renderResult(
    {
      columns: ['column', 'type', 'primary_key'],
      rows: table.columns.map((c) => [c.name, c.type === '' ? '(none)' : c.type, c.primaryKey ? 'yes' : 'no']),
      truncated: false,
    },
    { maxRows: Number.POSITIVE_INFINITY, maxChars: maxChars - 64 },
  );
  const text = `Table ${table.name}: ${table.rowCount} rows, ${table.columns.length} columns\n${body}`;
  describeTexts.set(table, { maxChars, text });
  return text;
}

export function unknownTableMessage(argument: string, db: DatabaseInfo): string {
  const shown = argument.length > 64 ? `${argument.slice(0, 64)}...` : argument;
  return `Unknown table '${shown}'. Available tables: ${db.tables.map((t) => t.name).join(', ')}`;
}

// Whitespace other than a lone space: only then does collapsing change anything (most arguments have none).
const NEEDS_COLLAPSE = /[^\S ]| {2}/;

/** First line of a text, whitespace collapsed, cut to `maxChars`. */
export function oneLine(text: string, maxChars: number): string {
  const flat = (NEEDS_COLLAPSE.test(text) ? text.replace(/\s+/g, ' ') : text).trim();
  return flat.length > maxChars ? `${flat.slice(0, maxChars - 3)}...` : flat;
}

/** An action_history entry: `QUERY SELECT ... -> 3 rows`, `DESCRIBE x -> error: ...`. */
export function historyEntry(actionType: string, argument: string, outcome: string, argumentChars: number): string {
  return `${actionType} ${oneLine(argument, argumentChars)} -> ${outcome}`;
}
