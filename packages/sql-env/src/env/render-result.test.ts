import { describe, expect, it } from 'vitest';
import { renderResult } from './render-result.ts';

const rows = (n: number): (string | number | null)[][] => Array.from({ length: n }, (_, i) => [i, `name ${i}`, i % 2 === 0 ? null : 1.5]);

describe('renderResult', () => {
  it('writes a header and one `a | b` line per row, NULL spelled out', () => {
    expect(renderResult({ columns: ['id', 'name', 'x'], rows: rows(2), truncated: false }, { maxRows: 20, maxChars: 2000 })).toBe(
      'id | name | x\n0 | name 0 | NULL\n1 | name 1 | 1.5\n(2 rows)',
    );
  });

  it('shows at most maxRows rows and says how many there were', () => {
    const text = renderResult({ columns: ['id', 'name', 'x'], rows: rows(45), truncated: false }, { maxRows: 20, maxChars: 2000 });
    expect(text.split('\n')).toHaveLength(22);
    expect(text).toContain('(showing 20 of 45 rows)');
    expect(text).not.toContain('name 20');
  });

  it('marks a result the executor cut short with a +', () => {
    expect(renderResult({ columns: ['id', 'name', 'x'], rows: rows(30), truncated: true }, { maxRows: 20, maxChars: 2000 })).toContain('(showing 20 of 30+ rows)');
  });

  it('never exceeds maxChars, even with one huge cell', () => {
    const wide = renderResult({ columns: ['t'], rows: [['x'.repeat(10_000)], ['y']], truncated: false }, { maxRows: 20, maxChars: 2000 });
    expect(wide.length).toBeLessThanOrEqual(2000);
    expect(wide).toContain('output cut to 2000 characters');
    const many = renderResult({ columns: ['t'], rows: Array.from({ length: 20 }, () => ['z'.repeat(150)]), truncated: false }, { maxRows: 20, maxChars: 2000 });
    expect(many.length).toBeLessThanOrEqual(2000);
    expect(many.split('\n').slice(0, -1).every((line) => line === 't' || line === 'z'.repeat(150))).toBe(true);
  });

  it('keeps rows on one line and the separator unambiguous', () => {
    expect(renderResult({ columns: ['a'], rows: [['x|y\nz']], truncated: false }, { maxRows: 20, maxChars: 2000 })).toBe('a\nx\\|y\\nz\n(1 row)');
  });

  it('renders empty results with their header', () => {
    expect(renderResult({ columns: ['a', 'b'], rows: [], truncated: false }, { maxRows: 20, maxChars: 2000 })).toBe('a | b\n(0 rows)');
  });
});
