import { describe, expect, it } from 'vitest';
import { FastPathTable, isRepeatableSql } from './fast-path.ts';

describe('isRepeatableSql', () => {
  it('accepts plain reads, including columns that share a name with a clock function', () => {
    expect(isRepeatableSql('SELECT count(*) FROM "student"')).toBe(true);
    expect(isRepeatableSql('SELECT date, time FROM events WHERE date > \'2020-01-01\' ORDER BY time')).toBe(true);
    expect(isRepeatableSql("SELECT 'random()' AS label, \"current_date\" FROM t")).toBe(true);
  });

  it('refuses anything that can differ between runs: random, clock and change counters', () => {
    for (const sql of [
      'SELECT random()',
      'SELECT * FROM t ORDER BY RANDOM () LIMIT 1',
      'SELECT hex(randomblob(8))',
      "SELECT date('now')",
      "SELECT * FROM t WHERE x < strftime('%s', 'now')",
      'SELECT julianday(\'now\'), unixepoch()',
      'SELECT CURRENT_TIMESTAMP',
      'select current_date',
      'SELECT "random"()',
      'SELECT [datetime]()',
      'SELECT changes(), total_changes(), last_insert_rowid()',
      'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < abs(random()) % 10) SELECT count(*) FROM c',
    ]) {
      expect(isRepeatableSql(sql), sql).toBe(false);
    }
  });
});

describe('FastPathTable', () => {
  const proof = (maxRows: number) => ({ maxRows, complete: true });

  it('finds a proof only for the same text, database and row cap', () => {
    const table = new FastPathTable(10);
    table.prove('/a.sqlite', 'SELECT 1', proof(100));
    expect(table.lookup('/a.sqlite', 'SELECT 1', 100)).toEqual(proof(100));
    expect(table.lookup('/b.sqlite', 'SELECT 1', 100)).toBeUndefined();
    expect(table.lookup('/a.sqlite', 'SELECT 1', 5)).toBeUndefined();
    expect(table.lookup('/a.sqlite', 'select 1', 100)).toBeUndefined();
    table.demote('/a.sqlite', 'SELECT 1');
    expect(table.lookup('/a.sqlite', 'SELECT 1', 100)).toBeUndefined();
    expect(table.size).toBe(0);
  });

  it('stays within its capacity, dropping the oldest texts first', () => {
    const table = new FastPathTable(3);
    for (let i = 0; i < 5; i += 1) table.prove('/a.sqlite', `SELECT ${i}`, proof(1));
    table.prove('/b.sqlite', 'SELECT 4', proof(1));
    expect(table.size).toBeLessThanOrEqual(3);
    expect(table.lookup('/a.sqlite', 'SELECT 0', 1)).toBeUndefined();
    expect(table.lookup('/a.sqlite', 'SELECT 4', 1)).toBeDefined();
    expect(table.lookup('/b.sqlite', 'SELECT 4', 1)).toBeDefined();
  });
});
