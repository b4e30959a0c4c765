import type { Cell } from '@sqlenv/protocol';
import { NUMBER_RE } from '../verifier/match-cell.ts';

/**
 * A cell reduced to what the progress reward compares: numbers (and numeric
 * text) as numbers, non-integers rounded to float32 precision (~7 significant
 * digits, one cheap Math.fround) so that 2.5 equals "2.5" and two float
 * computations of the same average agree; other text trimmed and case-folded;
 * NULL as null. Map keys compare with SameValueZero, so -0 = 0.
 */
export type ValueKey = string | number | null;


function roundNumber(value: number): number {
  // fround keeps ±Infinity; a finite double beyond float32 range would become
  // Infinity, so those (never seen in practice) stay as they are.
  if (Number.isInteger(value)) return value;
  const rounded = Math.fround(value);
  return Number.isFinite(rounded) ? rounded : value;
}

function looksNumeric(text: string): boolean {
  // Cheap first-character gate: most text cells never reach the regex.
  const code = text.charCodeAt(0);
  return (code >= 48 && code <= 57) || code === 43 || code === 45 || code === 46 || code === 32;
}

export function valueKey(cell: Cell | undefined): ValueKey {
  if (cell === null || cell === undefined) return null;
  if (typeof cell === 'number') return roundNumber(cell);
  if (looksNumeric(cell)) {
    const trimmed = cell.trim();
    if (NUMBER_RE.test(trimmed)) return roundNumber(Number(trimmed));
  }
  return cell.trim().toLowerCase();
}

/** Numeric cells' [min, max]; undefined when there are none. */
export interface NumericRange {
  readonly min: number;
  readonly max: number;
}

/**
 * What the progress reward needs of a question's gold rows, computed once per
 * question (datasets may cache it) instead of once per step.
 */
export interface GoldProfile {
  readonly kind: 'gold-profile';
  readonly rowCount: number;
  readonly cellCount: number;
  /** Multiset of the gold cells' value keys. */
  readonly valueCounts: ReadonlyMap<ValueKey, number>;
  readonly numericRange: NumericRange | undefined;
}

const profiles = new WeakMap<object, GoldProfile>();

/**
 * profileGold() remembered per rows array: a dataset's question records keep
 * the same gold_rows array for the whole run, so each question is profiled
 * once however many episodes play it. Gold rows must not be mutated.
 */
export function cachedGoldProfile(rows: readonly (readonly Cell[])[]): GoldProfile {
  let profile = profiles.get(rows);
  if (profile === undefined) {
    profile = profileGold(rows);
    profiles.set(rows, profile);
  }
  return profile;
}

export function profileGold(rows: readonly (readonly Cell[])[]): GoldProfile {
  const valueCounts = new Map<ValueKey, number>();
  let cellCount = 0;
  let min = Infinity;
  let max = -Infinity;
  for (const row of rows) {
    for (const cell of row) {
      const key = valueKey(cell);
      valueCounts.set(key, (valueCounts.get(key) ?? 0) + 1);
      cellCount += 1;
      if (typeof key === 'number') {
        if (key < min) min = key;
        if (key > max) max = key;
      }
    }
  }
  return {
    kind: 'gold-profile',
    rowCount: rows.length,
    cellCount,
    valueCounts,
    numericRange: min <= max ? { min, max } : undefined,
  };
}
