import { describe, expect, it } from 'vitest';
import { buildTableIndex, resolveTable } from './resolve-table.ts';

const index = buildTableIndex(['Singer', 'Order Items', 'select', 'MixedCase']);

describe('resolveTable', () => {
  it('matches case-insensitively and returns the real spelling', () => {
    expect(resolveTable(index, 'singer')).toBe('Singer');
    expect(resolveTable(index, 'MIXEDCASE')).toBe('MixedCase');
  });

  it('tolerates quotes, brackets, backticks, a main. prefix, whitespace and a semicolon', () => {
    for (const arg of ['"Order Items"', '[order items]', '`Order Items`', "'order items'", '  main."Order Items" ;', 'Order Items']) {
      expect(resolveTable(index, arg)).toBe('Order Items');
    }
    expect(resolveTable(index, '"select"')).toBe('select');
    expect(resolveTable(index, 'singer ; ;\n')).toBe('Singer');
    expect(resolveTable(index, `singer${';'.repeat(100_000)}`)).toBe('Singer');
  });

  it('returns undefined for unknown names', () => {
    expect(resolveTable(index, 'singers')).toBeUndefined();
    expect(resolveTable(index, '')).toBeUndefined();
  });
});
