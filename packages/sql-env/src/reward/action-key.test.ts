import { describe, expect, it } from 'vitest';
import { actionKey, normaliseSql, normaliseTableName } from './action-key.ts';

describe('action keys', () => {
  it('fold SQL case and whitespace outside quotes only', () => {
    expect(normaliseSql('  SELECT  name,\n age FROM People WHERE x = 1 ;')).toBe('select name,age from people where x=1');
    expect(normaliseSql("select * from t where name = 'Bob'")).not.toBe(normaliseSql("select * from t where name = 'bob'"));
    expect(normaliseSql("SELECT 'A  B'")).toBe("select 'A  B'");
    expect(normaliseSql('SELECT "Full Name" FROM [My Table]')).toBe('select "Full Name" from [My Table]');
    expect(normaliseSql('SELECT 1 ;; ;')).toBe('select 1');
    expect(normaliseSql(`SELECT 1${';'.repeat(100_000)}`)).toBe('select 1');
    expect(normaliseSql(`SELECT 1${';'.repeat(100_000)}x`)).toBe(`select 1${';'.repeat(100_000)}x`);
  });

  it('fold table names and keep action types apart', () => {
    expect(normaliseTableName(' `Singer` ')).toBe('singer');
    expect(actionKey('DESCRIBE', 'Singer')).toBe(actionKey('DESCRIBE', '"singer"'));
    expect(actionKey('DESCRIBE', 'singer')).not.toBe(actionKey('SAMPLE', 'singer'));
  });
});

describe('normaliseSql (property)', () => {
  it('folds any spacing and casing of the same tokens, with and without quoted literals', async () => {
    const fc = (await import('fast-check')).default;
    const token = fc.constantFrom('SELECT', 'name', ',', 'age', 'FROM', 'people', 'WHERE', 'x', '=', '-1', '(', ')', '*', '<', 'count');
    const gap = fc.constantFrom(' ', '  ', '\n', '\t ', ' \r\n ');
    fc.assert(
      fc.property(fc.array(fc.tuple(token, gap, fc.boolean()), { minLength: 1, maxLength: 12 }), fc.boolean(), (parts, quoted) => {
        const literal = quoted ? " AND y = 'Mixed  Case'" : '';
        const spaced = parts.map(([t, g, upper]) => (upper ? t.toUpperCase() : t.toLowerCase()) + g).join('') + literal;
        const plain = parts.map(([t]) => t).join(' ') + literal;
        expect(normaliseSql(spaced)).toBe(normaliseSql(plain));
      }),
    );
  });
});

/** The folding rule spelled out one character at a time: the oracle for normaliseSql's segment-wise version. */
function normaliseSqlByChar(sql: string): string {
  const punctuation = new Set(['(', ')', ',', ';', '=', '<', '>', '!', '+', '-', '*', '/', '|', '%']);
  const closing: Record<string, string> = { "'": "'", '"': '"', '`': '`', '[': ']' };
  let out = '';
  let pendingSpace = false;
  let quote: string | undefined;
  for (const char of sql) {
    if (quote !== undefined) {
      out += char;
      if (char === quote) quote = undefined;
      continue;
    }
    if (/\s/.test(char)) {
      pendingSpace = out.length > 0;
      continue;
    }
    if (pendingSpace && !punctuation.has(char) && !punctuation.has(out[out.length - 1] ?? '')) out += ' ';
    pendingSpace = false;
    quote = closing[char];
    out += quote === undefined ? char.toLowerCase() : char;
  }
  return out.replace(/;+$/, '');
}

describe('normaliseSql (against a character-by-character oracle)', () => {
  it('agrees on arbitrary text mixing quotes, brackets, spaces and punctuation', async () => {
    const fc = (await import('fast-check')).default;
    const piece = fc.constantFrom('SELECT', 'a', 'B', ' ', '  ', '\n', '\t', "'", '"', '`', '[', ']', "''", ',', ';', '=', '(', ')', '-', '*', 'x y', 'Z');
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 30 }), (parts) => {
        const sql = parts.join('');
        expect(normaliseSql(sql)).toBe(normaliseSqlByChar(sql));
      }),
      { numRuns: 2_000 },
    );
  });
});
