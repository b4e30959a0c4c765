import { describe, expect, it } from 'vitest';
import { isDoubleQuotedStringError, singleQuoteStrings } from './double-quoted-strings.ts';

const names = new Set(['flight', 'origin', 'destination', 'order items', 'select', 'name']);

describe('singleQuoteStrings', () => {
  it('turns double-quoted values into string literals', () => {
    expect(singleQuoteStrings('SELECT flno FROM Flight WHERE origin  =  "Los Angeles" AND destination = "O\'Hare"', names)).toBe(
      "SELECT flno FROM Flight WHERE origin  =  'Los Angeles' AND destination = 'O''Hare'",
    );
    expect(singleQuoteStrings('SELECT count(*) FROM t WHERE a LIKE "%s%"', names)).toBe("SELECT count(*) FROM t WHERE a LIKE '%s%'");
  });

  it('keeps names: known tables and columns, aliases, qualified names, names after FROM/JOIN/AS', () => {
    const sql = 'SELECT "name", T1."x" AS "total" FROM "Order Items" AS T1 JOIN "unknown_tbl" ON 1 WHERE "select" = 1 ORDER BY "total"';
    expect(singleQuoteStrings(sql, names)).toBe(sql);
  });

  it('leaves text without double quotes, strings and comments alone', () => {
    const sql = `SELECT 'say "hi"' -- "x"\nFROM flight`;
    expect(singleQuoteStrings(sql, names)).toBe(sql);
  });

  it('recognises the SQLite error it fixes', () => {
    expect(isDoubleQuotedStringError('no such column: "Los Angeles" - should this be a string literal in single-quotes?')).toBe(true);
    expect(isDoubleQuotedStringError('no such column: salary')).toBe(false);
  });
});
