/**
 * Turn what an agent typed as a table name into the database's own spelling.
 * LLMs write `Singer`, `"singer"`, `[singer]`, `` `singer` ``, `main.singer` or
 * `singer;` for the same table; all of them should work, case-insensitively.
 */
export function normaliseTableArgument(argument: string): string {
  let name = argument.trim().replace(/;+\s*$/, '').trim();
  if (/^main\s*\.\s*/i.test(name)) name = name.replace(/^main\s*\.\s*/i, '');
  for (;;) {
    const first = name[0];
    const last = name[name.length - 1];
    const quoted = name.length >= 2
      && ((first === '"' && last === '"') || (first === '`' && last === '`') || (first === "'" && last === "'") || (first === '[' && last === ']'));
    if (!quoted) return name;
    name = name.slice(1, -1).trim();
  }
}

/** Case-insensitive index of a database's table names: lower-cased name → real name. */
export type TableIndex = ReadonlyMap<string, string>;

export function buildTableIndex(tableNames: readonly string[]): TableIndex {
  return new Map(tableNames.map((name) => [name.toLowerCase(), name]));
}

/** The real table name for an agent's argument, or undefined when the database has no such table. */
export function resolveTable(index: TableIndex, argument: string): string | undefined {
  return index.get(normaliseTableArgument(argument).toLowerCase());
}
