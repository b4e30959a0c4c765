import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { AppError, ErrorCode } from '@sqlenv/shared';
import { quoteIdentifier, readSchema } from './read-schema.ts';
import { makeTestDb } from './testing/make-test-db.ts';

let fixture: ReturnType<typeof makeTestDb>;
beforeAll(() => {
  fixture = makeTestDb();
});
afterAll(() => fixture.cleanup());

describe('readSchema', () => {
  it('lists user tables with columns, types, primary keys and row counts', () => {
    expect(readSchema(fixture.dbPath)).toEqual([
      {
        name: 'singer',
        columns: [
          { name: 'singer_id', type: 'INTEGER', primaryKey: true },
          { name: 'name', type: 'TEXT', primaryKey: false },
          { name: 'age', type: 'INT', primaryKey: false },
          { name: 'photo', type: 'BLOB', primaryKey: false },
        ],
        rowCount: 5,
      },
      {
        name: 'Concert Hall',
        columns: [
          { name: 'Hall Id', type: 'INTEGER', primaryKey: true },
          { name: 'Select', type: 'TEXT', primaryKey: false },
        ],
        rowCount: 3,
      },
      { name: 'empty', columns: [{ name: 'x', type: '', primaryKey: false }], rowCount: 0 },
    ]);
  });

  it('fails with NOT_FOUND for a missing file', () => {
    expect(() => readSchema(`${fixture.dir}/nope.sqlite`)).toThrow(AppError);
    try {
      readSchema(`${fixture.dir}/nope.sqlite`);
    } catch (error) {
      expect((error as AppError).code).toBe(ErrorCode.NOT_FOUND);
    }
  });
});

describe('quoteIdentifier', () => {
  it('makes names with spaces, quotes, reserved words and mixed case usable', () => {
    const db = new Database(':memory:');
    try {
      for (const name of ['Concert Hall', 'select', 'MiXeD', 'say "hi"', 'a;b']) {
        db.exec(`CREATE TABLE ${quoteIdentifier(name)} (${quoteIdentifier(`${name} col`)})`);
        db.prepare(`INSERT INTO ${quoteIdentifier(name)} VALUES (?)`).run(name);
        expect(db.prepare(`SELECT ${quoteIdentifier(`${name} col`)} AS v FROM ${quoteIdentifier(name)}`).get()).toEqual({ v: name });
      }
    } finally {
      db.close();
    }
    expect(quoteIdentifier('say "hi"')).toBe('"say ""hi"""');
    expect(() => quoteIdentifier('a\0b')).toThrow(AppError);
  });
});
