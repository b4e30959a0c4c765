import type { DomainSpec } from './domain-spec.ts';

/** One entry of Spider's tables.json (https://github.com/taoyds/spider, README "Tables"). */
export interface SpiderTablesEntry {
  db_id: string;
  table_names_original: string[];
  table_names: string[];
  column_names_original: [number, string][];
  column_names: [number, string][];
  column_types: string[];
  primary_keys: number[];
  foreign_keys: [number, number][];
}

/** Spider's readable names: "CustomerId" → "customer id", "first_name" → "first name". */
export function naturalName(identifier: string): string {
  return identifier
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/[_\s]+/g, ' ')
    .trim()
    .toLowerCase();
}

export function spiderTablesEntry(domain: DomainSpec): SpiderTablesEntry {
  // Column index 0 is Spider's "*" pseudo-column; real columns count from 1.
  const columnIndex = new Map<string, number>();
  const columnNamesOriginal: [number, string][] = [[-1, '*']];
  const columnNames: [number, string][] = [[-1, '*']];
  const columnTypes: string[] = ['text'];
  const primaryKeys: number[] = [];
  domain.tables.forEach((table, tableIndex) => {
    for (const column of table.columns) {
      const index = columnNamesOriginal.length;
      columnIndex.set(`${table.name}.${column.name}`, index);
      columnNamesOriginal.push([tableIndex, column.name]);
      columnNames.push([tableIndex, naturalName(column.name)]);
      // Spider's type vocabulary: number / text / time (plus boolean, others).
      columnTypes.push(column.temporal === true ? 'time' : column.type === 'TEXT' ? 'text' : 'number');
      if (column.primaryKey === true) primaryKeys.push(index);
    }
  });
  const foreignKeys: [number, number][] = [];
  for (const table of domain.tables) {
    for (const column of table.columns) {
      if (column.references === undefined) continue;
      const from = columnIndex.get(`${table.name}.${column.name}`);
      const to = columnIndex.get(`${column.references.table}.${column.references.column}`);
      if (from === undefined || to === undefined) {
        throw new RangeError(`${domain.dbId}: foreign key ${table.name}.${column.name} points at an unknown column`);
      }
      foreignKeys.push([from, to]);
    }
  }
  return {
    db_id: domain.dbId,
    table_names_original: domain.tables.map((table) => table.name),
    table_names: domain.tables.map((table) => naturalName(table.name)),
    column_names_original: columnNamesOriginal,
    column_names: columnNames,
    column_types: columnTypes,
    primary_keys: primaryKeys,
    foreign_keys: foreignKeys,
  };
}
