import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import type { Cell } from '@sqlenv/protocol';
import { parseRewardConfig } from './reward-config.ts';
import { profileGold } from './gold-profile.ts';
import { binPotential, cardinalityMatch, endpointAgreement, scorePotential } from './potential.ts';

const config = parseRewardConfig();
const LEVELS = [0, 0.25, 0.5, 0.75, 1];

const cell: fc.Arbitrary<Cell> = fc.oneof(
  fc.integer({ min: -50, max: 50 }),
  fc.double({ min: -1e6, max: 1e6, noNaN: true }),
  fc.constantFrom('a', 'b', 'Alice', 'bob', ' 12 ', '3.5'),
  fc.constant(null),
);
const rowsArb = fc.integer({ min: 1, max: 4 }).chain((width) => fc.array(fc.array(cell, { minLength: width, maxLength: width }), { maxLength: 30 }));

describe('potential Φ', () => {
  it('is always one of the five levels in [0, 1], and so are its parts', () => {
    fc.assert(
      fc.property(rowsArb, rowsArb, (gold, predicted) => {
        const score = scorePotential(profileGold(gold), predicted, config);
        expect(LEVELS).toContain(score.binned);
        for (const part of [score.cardinality, score.valueOverlap, score.numericRange ?? 0, score.raw]) {
          expect(part).toBeGreaterThanOrEqual(0);
          expect(part).toBeLessThanOrEqual(1);
        }
        expect(score.binned).toBeLessThanOrEqual(score.raw + 1e-9);
      }),
      { numRuns: 500 },
    );
  });

  it('is 1 for the gold rows themselves, in any order', () => {
    fc.assert(
      fc.property(rowsArb, (gold) => {
        const profile = profileGold(gold);
        expect(scorePotential(profile, gold, config).binned).toBe(1);
        expect(scorePotential(profile, [...gold].reverse(), config).binned).toBe(1);
      }),
    );
  });

  it('is never 1 for a result with a different value multiset', () => {
    fc.assert(
      fc.property(rowsArb.filter((rows) => rows.length > 0), (gold) => {
        const extra = [...gold, gold[0] as Cell[]];
        expect(scorePotential(profileGold(gold), extra, config).binned).toBeLessThan(1);
        expect(scorePotential(profileGold(gold), gold.slice(1), config).binned).toBeLessThan(1);
      }),
    );
  });

  it('scores the parts as documented', () => {
    expect(cardinalityMatch(0, 0)).toBe(1);
    expect(cardinalityMatch(0, 3)).toBe(0);
    expect(cardinalityMatch(3, 4)).toBe(0.75);
    expect(endpointAgreement(25, 24)).toBeCloseTo(1 - 1 / 49);
    expect(endpointAgreement(-5, 5)).toBe(0);
    expect(endpointAgreement(0, 0)).toBe(1);
    expect(binPotential(0.74, 5)).toBe(0.5);
    expect(binPotential(0.75, 5)).toBe(0.75);
    expect(binPotential(0.999, 5)).toBe(0.75);
  });

  it('gives partial credit to a near miss and none to an unrelated result', () => {
    const profile = profileGold([[25]]); // SELECT count(*) ...
    const nearMiss = scorePotential(profile, [[24]], config);
    expect(nearMiss).toMatchObject({ cardinality: 1, valueOverlap: 0 });
    expect(nearMiss.numericRange).toBeCloseTo(1 - 1 / 49);
    expect(nearMiss.binned).toBe(0.25);
    expect(scorePotential(profile, [['x'], ['y'], ['z'], ['w']], config).binned).toBe(0);
  });

  it('leaves the numeric-range part out when the gold rows hold no numbers', () => {
    const profile = profileGold([['Alice'], ['Bob']]);
    const score = scorePotential(profile, [['Carol'], ['Dan']], config);
    expect(score.numericRange).toBeNull();
    expect(score.raw).toBeCloseTo(0.25 / 0.75); // cardinality only
    expect(scorePotential(profile, [['alice'], ['BOB ']], config).binned).toBe(1); // values are case-folded
  });

  it('matches numbers and numeric text, and float noise', () => {
    const profile = profileGold([['2.5', 10 / 3]]);
    expect(scorePotential(profile, [[2.5, 3.3333333333333335]], config).binned).toBe(1);
    expect(scorePotential(profile, [[2.5, 3.333333333333333]], config).binned).toBe(1);
  });

  it('treats empty results per the reference: both empty → 1, one empty → 0', () => {
    expect(scorePotential(profileGold([]), [], config).binned).toBe(1);
    expect(scorePotential(profileGold([]), [[1]], config).binned).toBe(0);
    expect(scorePotential(profileGold([[1]]), [], config).binned).toBe(0);
  });
});
