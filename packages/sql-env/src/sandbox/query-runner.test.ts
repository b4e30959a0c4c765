import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode } from '@sqlenv/shared';
import { QueryLimitsSchema } from './executor-config.ts';
import { assertReadOnlyStatement, QueryRunner } from './query-runner.ts';
import { makeTestDb } from './testing/make-test-db.ts';
import { appErrorOf } from '@sqlenv/shared/testing';

const FOREVER = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c)';

let fixture: ReturnType<typeof makeTestDb>;
let runner: QueryRunner;

beforeAll(() => {
  fixture = makeTestDb();
  runner = new QueryRunner(QueryLimitsSchema.parse({ maxCellChars: 100, maxResultChars: 10_000 }));
});
afterAll(() => {
  runner.close();
  fixture.cleanup();
});

describe('QueryRunner', () => {
  it('returns columns and rows', () => {
    const result = runner.run(fixture.dbPath, 'SELECT name, age FROM singer WHERE age > 40 ORDER BY age', 10);
    expect(result).toMatchObject({ columns: ['name', 'age'], rows: [['Rose White', 41], ['Joe Sharp', 52]], truncated: false, cellsTruncated: false });
    expect(result.elapsedMs).toBeGreaterThanOrEqual(0);
  });

  it('marks truncation only when rows were left behind', () => {
    expect(runner.run(fixture.dbPath, 'SELECT name FROM singer', 5)).toMatchObject({ truncated: false });
    const four = runner.run(fixture.dbPath, 'SELECT name FROM singer', 4);
    expect(four.rows).toHaveLength(4);
    expect(four.truncated).toBe(true);
    expect(runner.run(fixture.dbPath, 'SELECT name FROM singer', 0)).toMatchObject({ rows: [], truncated: true });
    expect(runner.run(fixture.dbPath, 'SELECT * FROM empty', 0)).toMatchObject({ rows: [], truncated: false });
  });

  it('caps rows while fetching: an endless result stops at maxRows', () => {
    const result = runner.run(fixture.dbPath, `${FOREVER} SELECT x FROM c`, 50);
    expect(result.rows).toHaveLength(50);
    expect(result.rows[49]).toEqual([50]);
    expect(result.truncated).toBe(true);
  });

  it('caps the total result size while fetching', () => {
    const result = runner.run(fixture.dbPath, `${FOREVER} SELECT printf('%.*c', 90, 'x') FROM c`, 1_000_000);
    expect(result.truncated).toBe(true);
    expect(result.rows.length).toBeGreaterThan(50);
    expect(result.rows.length * 90).toBeLessThanOrEqual(10_000);
  });

  it('cuts long strings and BLOBs (as hex) to maxCellChars', () => {
    const result = runner.run(fixture.dbPath, "SELECT printf('%.*c', 5000, 'y'), zeroblob(1000), x'00ff10', photo FROM singer LIMIT 1", 10);
    const [text, blob, small, photo] = result.rows[0] ?? [];
    expect(text).toBe(`${'y'.repeat(100)}…`);
    expect(blob).toBe(`${'00'.repeat(50)}…`);
    expect(small).toBe('00ff10');
    expect(photo).toBe('00ff09');
    expect(result.cellsTruncated).toBe(true);
  });

  it('does not split a surrogate pair when cutting', () => {
    const [cell] = runner.run(fixture.dbPath, `SELECT printf('%.*c', 99, 'a') || '😀😀'`, 1).rows[0] ?? [];
    expect(cell).toBe(`${'a'.repeat(99)}…`);
  });

  it('gives the same result fetching all rows at once (bounded) as row by row, caps included', () => {
    const cases: [string, number][] = [
      ['SELECT name, age FROM singer ORDER BY age', 10],
      ['SELECT name FROM singer', 4],
      ['SELECT * FROM empty', 3],
      ["SELECT printf('%.*c', 5000, 'y'), zeroblob(1000), 1e999, NULL FROM singer", 10],
      [`${FOREVER} SELECT printf('%.*c', 90, 'x') FROM c LIMIT 300`, 1_000],
    ];
    for (const [sql, maxRows] of cases) {
      const byRow = runner.run(fixture.dbPath, sql, maxRows);
      const bounded = runner.run(fixture.dbPath, sql, maxRows, true);
      expect({ ...bounded, elapsedMs: 0 }, sql).toEqual({ ...byRow, elapsedMs: 0 });
    }
    // Both paths really cut: rows, cells and the result budget.
    expect(runner.run(fixture.dbPath, 'SELECT name FROM singer', 4, true)).toMatchObject({ truncated: true });
    expect(runner.run(fixture.dbPath, `${FOREVER} SELECT printf('%.*c', 90, 'x') FROM c LIMIT 300`, 1_000, true).truncated).toBe(true);
  });

  it('keeps at most statementCacheSize statements, evicting the least recently used', () => {
    const small = new QueryRunner(QueryLimitsSchema.parse({ statementCacheSize: 2 }));
    try {
      const sqls = ['SELECT 1', 'SELECT 2', 'SELECT 3'];
      for (const sql of sqls) small.run(fixture.dbPath, sql, 1);
      small.run(fixture.dbPath, 'SELECT 2', 1);
      small.run(fixture.dbPath, 'SELECT 4', 1); // evicts SELECT 3 (SELECT 2 was used since)
      const cached = (small as unknown as { statements: Map<string, Map<string, unknown>> }).statements.get(fixture.dbPath);
      expect([...(cached?.keys() ?? [])].sort()).toEqual(['SELECT 2', 'SELECT 4']);
    } finally {
      small.close();
    }
  });

  it('turns non-finite reals into text and keeps integers as numbers', () => {
    expect(runner.run(fixture.dbPath, 'SELECT 1e999, -1e999, 9007199254740993, 2.5, NULL', 1).rows).toEqual([['Inf', '-Inf', 9007199254740992, 2.5, null]]);
  });

  it('runs refused function names used as aliases, and refuses them where SQLite would call them', () => {
    const aliases = "SELECT 1 AS edit, 2 AS zipfile, p.name AS pragma_city FROM singer AS pragma_city JOIN singer p ON p.singer_id = pragma_city.singer_id WHERE p.name = 'Joe Sharp'";
    expect(runner.run(fixture.dbPath, aliases, 5)).toMatchObject({ columns: ['edit', 'zipfile', 'pragma_city'], rows: [[1, 2, 'Joe Sharp']] });
    for (const sql of ['SELECT * FROM pragma_database_list', 'SELECT * FROM (pragma_database_list)', "SELECT 1 WHERE 'x' IN main.pragma_compile_options"]) {
      expect(appErrorOf(() => runner.run(fixture.dbPath, sql, 5)).code).toBe(ErrorCode.SQL_REJECTED);
    }
  });

  it('maps failures to SQL_REJECTED, SQL_ERROR and NOT_FOUND', () => {
    expect(appErrorOf(() => runner.run(fixture.dbPath, 'DROP TABLE singer', 10)).code).toBe(ErrorCode.SQL_REJECTED);
    const noColumn = appErrorOf(() => runner.run(fixture.dbPath, 'SELECT salary FROM singer', 10));
    expect(noColumn.code).toBe(ErrorCode.SQL_ERROR);
    expect(noColumn.message).toBe('no such column: salary');
    expect(appErrorOf(() => runner.run(fixture.dbPath, 'SELECT FROM singer', 10)).message).toMatch(/syntax error/);
    expect(appErrorOf(() => runner.run(fixture.dbPath, 'SELECT ?', 10)).code).toBe(ErrorCode.SQL_ERROR);
    expect(appErrorOf(() => runner.run(fixture.dbPath, "SELECT load_extension('x')", 10)).code).toBe(ErrorCode.SQL_REJECTED);
    expect(appErrorOf(() => runner.run(`${fixture.dir}/missing.sqlite`, 'SELECT 1', 10)).code).toBe(ErrorCode.NOT_FOUND);
  });

  it('keeps answering correctly when statements and connections are evicted', () => {
    const other = makeTestDb();
    const tiny = new QueryRunner(QueryLimitsSchema.parse({ statementCacheSize: 1, maxOpenDatabases: 1 }));
    try {
      for (let i = 0; i < 3; i += 1) {
        expect(tiny.run(fixture.dbPath, 'SELECT count(*) FROM singer', 1).rows).toEqual([[5]]);
        expect(tiny.run(other.dbPath, 'SELECT count(*) FROM "Concert Hall"', 1).rows).toEqual([[3]]);
        expect(tiny.run(fixture.dbPath, 'SELECT max(age) FROM singer', 1).rows).toEqual([[52]]);
      }
    } finally {
      tiny.close();
      other.cleanup();
    }
  });
});

describe('assertReadOnlyStatement (second line of defence)', () => {
  it('refuses statements that return no rows or write, judged by SQLite', () => {
    const db = new Database(':memory:');
    db.exec('CREATE TABLE t (a)');
    try {
      expect(() => assertReadOnlyStatement(db.prepare('SELECT a FROM t'))).not.toThrow();
      for (const sql of ["ATTACH ':memory:' AS other", 'BEGIN', 'INSERT INTO t VALUES (1)', 'INSERT INTO t VALUES (1) RETURNING a', 'DELETE FROM t RETURNING a', 'PRAGMA user_version = 3']) {
        const error = appErrorOf(() => assertReadOnlyStatement(db.prepare(sql)));
        expect(error.code, sql).toBe(ErrorCode.SQL_REJECTED);
      }
    } finally {
      db.close();
    }
  });
});
