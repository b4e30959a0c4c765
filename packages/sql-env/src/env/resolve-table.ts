// Anchored, and each `\s*` is followed by a literal it cannot match: linear in the argument.
const MAIN_PREFIX_RE = /^main\s*\.\s*/i;

/**
 * The text without trailing semicolons and whitespace (`singer ; ;`). A scan
 * from the end, not `/;+\s*$/`: that pattern retries from every `;` of a long
 * run and took seconds on a 100 KB argument of semicolons.
 */
function trimTrailingSemicolons(text: string): string {
  let end = text.length;
  while (end > 0) {
    const char = text[end - 1] as string;
    if (char !== ';' && char.trim() !== '') break;
    end -= 1;
  }
  return text.slice(0, end);
}

/**
 * Turn what an agent typed as a table name into the database's own spelling.
 * LLMs write `Singer`, `"singer"`, `[singer]`, `` `singer` ``, `main.singer` or
 * `singer;` for the same table; all of them should work, case-insensitively.
 */
export function normaliseTableArgument(argument: string): string {
  let name = trimTrailingSemicolons(argument).trim();
  const schemaPrefix = MAIN_PREFIX_RE.exec(name);
  if (schemaPrefix !== null) name = name.slice(schemaPrefix[0].length);
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
