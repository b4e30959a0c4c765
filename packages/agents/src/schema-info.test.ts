import { describe, expect, it } from 'vitest';
import { tableNamesFromSchemaInfo } from './schema-info.ts';

describe('tableNamesFromSchemaInfo', () => {
  it('reads the table of each bullet line, before its row count or columns', () => {
    const info = 'Tables:\n- singer\n- concert (12 rows): id INTEGER PK, name TEXT\n* Order Items: a, b\n-   spaced   (3 rows)\nnot a table\n- \n';
    expect(tableNamesFromSchemaInfo(info)).toEqual(['singer', 'concert', 'Order Items', 'spaced']);
  });

  it('keeps a leading colon or parenthesis as part of the name', () => {
    expect(tableNamesFromSchemaInfo('- (odd)\n- :x')).toEqual(['(odd)', ':x']);
  });

  it('reads a line of 100,000 spaces in linear time', () => {
    expect(tableNamesFromSchemaInfo(`- a${' '.repeat(100_000)}x`)).toEqual([`a${' '.repeat(100_000)}x`]);
  });
});
