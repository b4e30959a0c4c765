import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { historyEntry, oneLine } from './episode-text.ts';

/** The plain definition oneLine must keep matching (it skips the regex when nothing would change). */
function reference(text: string, maxChars: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > maxChars ? `${flat.slice(0, maxChars - 3)}...` : flat;
}

describe('oneLine', () => {
  it('collapses whitespace runs, trims and cuts', () => {
    expect(oneLine('  SELECT *\n  FROM t\t ', 100)).toBe('SELECT * FROM t');
    expect(oneLine('SELECT name FROM singer', 100)).toBe('SELECT name FROM singer');
    expect(oneLine('a\u00a0b', 100)).toBe('a b');
    expect(oneLine('abcdefghij', 8)).toBe('abcde...');
    expect(historyEntry('QUERY', 'SELECT  1', '1 row', 100)).toBe('QUERY SELECT 1 -> 1 row');
  });

  it('matches the plain definition on any whitespace mix', () => {
    const unit = fc.constantFrom(' ', '  ', '\t', '\n', '\r', '\u00a0', '\ufeff', '\u2028', 'a', 'b', 'é');
    fc.assert(
      fc.property(fc.string({ unit }), fc.integer({ min: 4, max: 40 }), (text, maxChars) => {
        expect(oneLine(text, maxChars)).toBe(reference(text, maxChars));
      }),
      { numRuns: 3_000 },
    );
  });
});
