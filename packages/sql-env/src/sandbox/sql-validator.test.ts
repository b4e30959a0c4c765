import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AppError, ErrorCode } from '@sqlenv/shared';
import { validateSql } from './sql-validator.ts';
import { TokenKind, tokenizeSql } from './sql-tokenizer.ts';

const options = { maxSqlChars: 10_000 };

function rejection(sql: string): AppError {
  try {
    validateSql(sql, options);
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
  throw new Error(`expected ${JSON.stringify(sql)} to be rejected`);
}

describe('tokenizeSql', () => {
  it('skips comments and keeps literals and quoted identifiers whole', () => {
    const tokens = tokenizeSql(`SELECT 'a;b' , "x""y", [z w], \`q\` -- DROP\n/* ; */ FROM t;`);
    expect(tokens.map((t) => [t.kind, t.text])).toEqual([
      [TokenKind.WORD, 'SELECT'],
      [TokenKind.STRING, "'a;b'"],
      [TokenKind.PUNCT, ','],
      [TokenKind.QUOTED_IDENTIFIER, 'x"y'],
      [TokenKind.PUNCT, ','],
      [TokenKind.QUOTED_IDENTIFIER, 'z w'],
      [TokenKind.PUNCT, ','],
      [TokenKind.QUOTED_IDENTIFIER, 'q'],
      [TokenKind.WORD, 'FROM'],
      [TokenKind.WORD, 'T'],
      [TokenKind.PUNCT, ';'],
    ]);
  });

  it('handles escaped quotes, numbers and unterminated tokens', () => {
    expect(tokenizeSql("'it''s'")).toMatchObject([{ kind: TokenKind.STRING, text: "'it''s'", unterminated: false }]);
    expect(tokenizeSql('1.5e-3 0x1F .5').map((t) => t.text)).toEqual(['1.5e-3', '0x1F', '.5']);
    expect(tokenizeSql("SELECT 'open")).toMatchObject([{ kind: TokenKind.WORD }, { kind: TokenKind.STRING, unterminated: true }]);
    expect(tokenizeSql('SELECT 1 /* never closed ; DROP')).toHaveLength(2);
  });
});

describe('validateSql: allowed', () => {
  const allowed: [string, string][] = [
    ['plain SELECT', 'SELECT name FROM singer'],
    ['lower case, trailing semicolon', 'select count(*) from singer;'],
    ['leading comments', '-- list singers\n/* all of them */ SELECT * FROM singer'],
    ['trailing comment after semicolon', 'SELECT 1; -- done'],
    ['strings containing ; and DROP', "SELECT 'a; DROP TABLE singer' AS s, 'DELETE' FROM singer WHERE name = ';'"],
    ['quoted identifiers', 'SELECT "DROP", [delete], `insert` FROM "my table" WHERE "Pragma" = 1'],
    ['WITH ... SELECT', 'WITH top AS (SELECT * FROM singer ORDER BY age DESC LIMIT 3) SELECT name FROM top'],
    ['WITH RECURSIVE with column list', 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 10) SELECT x FROM c'],
    ['several CTEs, one using a write keyword as a name', 'WITH "delete" AS (SELECT 1), b AS MATERIALIZED (SELECT 2) SELECT * FROM "delete", b'],
    ['replace() as a function', "SELECT replace(name, 'a', 'b') FROM singer"],
    ['VALUES', 'VALUES (1, 2), (3, 4)'],
    ['subquery with END in CASE', 'SELECT CASE WHEN age > 30 THEN 1 ELSE 0 END FROM (SELECT age FROM singer)'],
    ['string literal naming a refused function', "SELECT 'load_extension' FROM singer"],
    ['refused function names as aliases', 'SELECT 1 AS edit, 2 AS zipfile, name AS pragma_city, 3 "fsdir" FROM singer AS pragma_city'],
    ['a table alias without AS', 'SELECT pragma_city.name FROM singer pragma_city JOIN singer edit ON edit.id = pragma_city.id'],
    ['refused function names as columns and a type', 'SELECT edit, t.zipfile, "readfile", CAST(1 AS edit) FROM t WHERE pragma_x IN (1, 2) ORDER BY edit'],
  ];
  it.each(allowed)('%s', (_label, sql) => {
    const validated = validateSql(sql, options);
    expect(['SELECT', 'VALUES']).toContain(validated.verb);
    expect(validated.statement.endsWith(';')).toBe(false);
  });

  it('returns the statement without the trailing semicolon and comments', () => {
    expect(validateSql('  SELECT 1 ; -- bye', options).statement).toBe('SELECT 1');
  });
});

describe('validateSql: refused with SQL_REJECTED naming what was refused', () => {
  const refused: [string, RegExp][] = [
    ['', /empty SQL/],
    ['   \n\t ', /empty SQL/],
    ['-- only a comment', /empty SQL/],
    [';;', /empty SQL/],
    ['DROP TABLE singer', /DROP is not allowed/],
    ['CREATE TABLE x (a)', /CREATE is not allowed/],
    ['ALTER TABLE singer ADD COLUMN x', /ALTER is not allowed/],
    ['INSERT INTO singer VALUES (1)', /INSERT is not allowed/],
    ['UPDATE singer SET age = 1', /UPDATE is not allowed/],
    ['DELETE FROM singer', /DELETE is not allowed/],
    ['REPLACE INTO singer VALUES (1)', /REPLACE is not allowed/],
    ["ATTACH DATABASE 'x.db' AS x", /ATTACH is not allowed/],
    ['DETACH DATABASE x', /DETACH is not allowed/],
    ['PRAGMA table_info(singer)', /PRAGMA is not allowed/],
    ['pRaGmA writable_schema = ON', /PRAGMA is not allowed/],
    ['/* hi */ PRAGMA user_version', /PRAGMA is not allowed/],
    ['VACUUM', /VACUUM is not allowed/],
    ["VACUUM INTO '/tmp/copy.db'", /VACUUM is not allowed/],
    ['REINDEX', /REINDEX is not allowed/],
    ['ANALYZE', /ANALYZE is not allowed/],
    ['BEGIN', /BEGIN is not allowed/],
    ['COMMIT', /COMMIT is not allowed/],
    ['ROLLBACK', /ROLLBACK is not allowed/],
    ['SAVEPOINT a', /SAVEPOINT is not allowed/],
    ['EXPLAIN SELECT 1', /EXPLAIN is not allowed/],
    ['WITH x AS (SELECT 1) DELETE FROM singer', /DELETE after WITH is not allowed/],
    ['WITH x AS (SELECT 1) INSERT INTO singer SELECT * FROM x', /INSERT after WITH is not allowed/],
    ['WITH x AS (SELECT 1)', /WITH clause must lead into a SELECT/],
    ['SELECT 1; DROP TABLE x', /multiple statements.*found 2/],
    ['SELECT 1; -- comment\nDROP TABLE x', /multiple statements/],
    ['SELECT 1 /* ; */; /* hidden */ DELETE FROM singer', /multiple statements/],
    ["SELECT ';'; SELECT 2", /multiple statements/],
    ["SELECT load_extension('/tmp/evil.so')", /load_extension\(\) is not allowed/],
    ['SELECT "LOAD_EXTENSION"(\'x\')', /load_extension\(\) is not allowed/],
    ["SELECT readfile('/etc/passwd')", /readfile\(\) is not allowed/],
    ["SELECT writefile('/tmp/x', 'y')", /writefile\(\) is not allowed/],
    ["SELECT * FROM pragma_table_info('singer')", /PRAGMA functions/],
    ['SELECT edit(1, 2)', /edit\(\) is not allowed/],
    ["SELECT * FROM zipfile('a.zip')", /zipfile\(\) is not allowed/],
    ["SELECT name FROM fsdir ('.') AS f", /fsdir\(\) is not allowed/],
    ['SELECT "pragma_table_info"(\'singer\')', /PRAGMA functions/],
    ['SELECT * FROM pragma_database_list', /PRAGMA functions/],
    ['SELECT * FROM main.pragma_database_list', /PRAGMA functions/],
    ['SELECT * FROM singer, pragma_database_list', /PRAGMA functions/],
    ['SELECT * FROM singer JOIN t ON t.a = singer.id, pragma_database_list', /PRAGMA functions/],
    ['SELECT * FROM singer CROSS JOIN "pragma_database_list" AS d', /PRAGMA functions/],
    ['SELECT * FROM (pragma_database_list)', /PRAGMA functions/],
    ['SELECT * FROM singer, (SELECT 1) AS s, ((pragma_database_list))', /PRAGMA functions/],
    ["SELECT 1 WHERE 'x' IN pragma_compile_options", /PRAGMA functions/],
    ["SELECT 1 WHERE 'x' IN main.pragma_compile_options", /PRAGMA functions/],
    ['SELECT (SELECT count(*) FROM pragma_database_list) AS n FROM singer', /PRAGMA functions/],
    ['SELECT 1\0; DROP TABLE x', /NUL/],
    ['SELECT \ud800', /unpaired surrogate/],
    ['(SELECT 1)', /must start with SELECT or WITH/],
    ['"SELECT" 1', /must start with SELECT or WITH/],
  ];
  it.each(refused)('%j', (sql, message) => {
    const error = rejection(sql);
    expect(error.code).toBe(ErrorCode.SQL_REJECTED);
    expect(error.message).toMatch(message);
  });

  it('reports a first word that starts no SQL statement as SQLite would: a syntax error (SQL_ERROR)', () => {
    for (const [sql, word] of [['SELEC name FROM singer', 'SELEC'], ['SHOW TABLES', 'SHOW'], ['describe singer', 'describe']]) {
      const error = rejection(sql as string);
      expect(error.code).toBe(ErrorCode.SQL_ERROR);
      expect(error.message).toMatch(new RegExp(`^near "${word}": syntax error; only a single read-only SELECT`));
    }
  });

  it('refuses SQL over the length limit', () => {
    expect(rejection(`SELECT '${'x'.repeat(20_000)}'`).message).toMatch(/too long/);
  });
});

describe('validateSql: properties', () => {
  const quoteLiteral = (s: string): string => `'${s.replaceAll("'", "''")}'`;
  // Biased towards the characters that matter to a SQL lexer, plus arbitrary Unicode.
  const tricky = fc.constantFrom("'", '"', '`', '[', ']', ';', '-', '/', '*', '\n', ' ', 'DROP', 'x', 'é', '😀');
  const sqlText = fc.oneof(fc.string({ unit: tricky, maxLength: 30 }), fc.string({ unit: 'grapheme', maxLength: 30 }).filter((s) => !s.includes('\0')));

  it('accepts any string literal in a SELECT, whatever it contains', () => {
    fc.assert(fc.property(sqlText, (s) => validateSql(`SELECT ${quoteLiteral(s)} AS v`, options).verb === 'SELECT'));
  });

  it('accepts any quoted identifier in a SELECT', () => {
    fc.assert(fc.property(sqlText, (s) => validateSql(`SELECT "${s.replaceAll('"', '""')}" FROM t`, options).verb === 'SELECT'));
  });

  it('refuses anything with a second statement after a semicolon', () => {
    const second = fc.constantFrom('DROP TABLE t', 'SELECT 2', 'DELETE FROM t', 'x', '1');
    const glue = fc.constantFrom(';', '; ', ';\n', '; -- c\n', ';/* c */');
    fc.assert(fc.property(sqlText, glue, second, (s, g, tail) => rejection(`SELECT ${quoteLiteral(s)}${g}${tail}`).message.includes('multiple statements')));
  });
});
