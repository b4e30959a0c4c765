import type { Cell } from '@sqlenv/protocol';
import type { RewardConfig } from './reward-config.ts';
import { valueKey, type GoldProfile, type ValueKey } from './gold-profile.ts';

/** The parts of Φ for one query result (all in [0, 1]); see reward/README.md. */
export interface PotentialScore {
  /** 1 − |n_pred − n_gold| / max(n_pred, n_gold, 1); both empty → 1; one empty → 0. */
  readonly cardinality: number;
  /** Dice / F1 of the cell-value multisets: 2·|P ∩ G| / (|P| + |G|). */
  readonly valueOverlap: number;
  /** Agreement of the numeric [min, max]; null when the gold rows hold no numbers (not applicable). */
  readonly numericRange: number | null;
  /** Weighted mean of the applicable parts, before binning. */
  readonly raw: number;
  /** raw floored to one of `potentialBins` levels: the Φ the reward uses. */
  readonly binned: number;
}

// Absorbs float error so that a sum that "is" 0.75 does not floor to 0.5.
const BIN_EPSILON = 1e-9;

export function cardinalityMatch(predicted: number, gold: number): number {
  if (predicted === 0 && gold === 0) return 1;
  if (predicted === 0 || gold === 0) return 0;
  return 1 - Math.abs(predicted - gold) / Math.max(predicted, gold, 1);
}

/**
 * Symmetric relative agreement of two numbers: 1 − |a − b| / (|a| + |b|).
 * Scale-free, 1 only when equal, 0 for opposite signs or a zero against a non-zero.
 */
export function endpointAgreement(a: number, b: number): number {
  if (a === b) return 1;
  const score = 1 - Math.abs(a - b) / (Math.abs(a) + Math.abs(b));
  return Number.isFinite(score) ? score : 0;
}

/** Floors x ∈ [0, 1] to one of `bins` evenly spaced levels (0 and 1 included). */
export function binPotential(x: number, bins: number): number {
  const steps = bins - 1;
  const level = Math.floor(x * steps + BIN_EPSILON) / steps;
  return Math.min(1, Math.max(0, level));
}

/**
 * Scores a query result against the gold profile. One pass over the result's
 * cells; only values present in the gold multiset are counted, so the work is
 * O(cells) with one Map lookup each.
 */
export function scorePotential(gold: GoldProfile, rows: readonly (readonly Cell[])[], config: RewardConfig): PotentialScore {
  const used = new Map<ValueKey, number>();
  let cells = 0;
  let common = 0;
  let min = Infinity;
  let max = -Infinity;
  for (const row of rows) {
    for (const cell of row) {
      cells += 1;
      const key = valueKey(cell);
      if (typeof key === 'number') {
        if (key < min) min = key;
        if (key > max) max = key;
      }
      const available = gold.valueCounts.get(key);
      if (available === undefined) continue;
      const taken = used.get(key) ?? 0;
      if (taken < available) {
        used.set(key, taken + 1);
        common += 1;
      }
    }
  }

  const cardinality = cardinalityMatch(rows.length, gold.rowCount);
  const valueOverlap = cells === 0 && gold.cellCount === 0 ? 1 : (2 * common) / (cells + gold.cellCount);
  let numericRange: number | null = null;
  if (gold.numericRange !== undefined) {
    numericRange =
      min <= max ? (endpointAgreement(min, gold.numericRange.min) + endpointAgreement(max, gold.numericRange.max)) / 2 : 0;
  }

  // Weights are relative; a part that does not apply drops out of the mean.
  const rangeWeight = numericRange === null ? 0 : config.numericRangeWeight;
  const totalWeight = config.cardinalityWeight + config.valueOverlapWeight + rangeWeight;
  const raw =
    totalWeight > 0
      ? (config.cardinalityWeight * cardinality + config.valueOverlapWeight * valueOverlap + rangeWeight * (numericRange ?? 0)) / totalWeight
      : valueOverlap; // only a range weight, and no numbers in the gold rows: fall back to overlap
  return { cardinality, valueOverlap, numericRange, raw, binned: binPotential(raw, config.potentialBins) };
}
