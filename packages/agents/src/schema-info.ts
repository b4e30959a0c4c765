/**
 * Table names visible in an observation's `schema_info`. The environment
 * renders one table per line as `- <name>` (optionally followed by
 * `: <columns>` or ` (<n> rows)` once described); other lines are headers.
 */
export function tableNamesFromSchemaInfo(schemaInfo: string): string[] {
  const names: string[] = [];
  for (const line of schemaInfo.split('\n')) {
    const match = /^\s*[-*]\s+(.+?)\s*(?:[:(].*)?$/.exec(line);
    if (match?.[1] !== undefined) names.push(match[1]);
  }
  return names;
}
