/**
 * Table names visible in an observation's `schema_info`. The environment
 * renders one table per line as `- <name>` (optionally followed by
 * `: <columns>` or ` (<n> rows)` once described); other lines are headers.
 */
export function tableNamesFromSchemaInfo(schemaInfo: string): string[] {
  const names: string[] = [];
  for (const line of schemaInfo.split('\n')) {
    const name = tableNameOfLine(line);
    if (name !== undefined) names.push(name);
  }
  return names;
}

const BULLET_RE = /^\s*[-*]\s+/;

/**
 * `- <name>` up to the first `:` or `(` after it, trailing whitespace dropped.
 * Index scans rather than a lazy `(.+?)\s*(?:[:(].*)?$`, which backtracks
 * quadratically on a long line of spaces (the text comes from a server).
 */
function tableNameOfLine(line: string): string | undefined {
  const bullet = BULLET_RE.exec(line);
  if (bullet === null) return undefined;
  const rest = line.slice(bullet[0].length);
  let end = rest.length;
  for (let i = 1; i < rest.length; i += 1) {
    if (rest[i] === ':' || rest[i] === '(') {
      end = i;
      break;
    }
  }
  const name = rest.slice(0, end).trimEnd();
  return name === '' ? undefined : name;
}
