import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import type { Cell } from '@sqlenv/protocol';
import { AppError } from '@sqlenv/shared';
import { parseRewardConfig } from './reward-config.ts';
import { profileGold } from './gold-profile.ts';
import { combineBreakdowns, createRewardTracker, type RewardStep } from './reward-tracker.ts';

const config = parseRewardConfig();
const goldRows: Cell[][] = [
  ['Alice', 30],
  ['Bob', 25],
  ['Carol', 41],
];

const rowsArb: fc.Arbitrary<Cell[][]> = fc.oneof(
  fc.constant(goldRows),
  fc.subarray(goldRows),
  fc.array(fc.tuple(fc.constantFrom('Alice', 'Bob', 'Zed', 'x'), fc.integer({ min: 0, max: 100 })), { maxLength: 6 }),
);
const stepArb: fc.Arbitrary<RewardStep> = fc.oneof(
  fc.record({ actionType: fc.constantFrom('DESCRIBE' as const, 'SAMPLE' as const), argument: fc.constantFrom('people', 'PEOPLE', 'pets', 'nope'), ok: fc.boolean() }),
  fc.record({
    actionType: fc.constant('QUERY' as const),
    argument: fc.constantFrom('SELECT name, age FROM people', 'select name,age from people', 'SELECT * FROM pets', 'SELEC x'),
    ok: fc.boolean(),
    rows: rowsArb,
  }),
);

describe('reward tracker (properties)', () => {
  it('keeps every dense step within the clip bounds and Φ on the five levels', () => {
    fc.assert(
      fc.property(fc.array(stepArb, { maxLength: 15 }), (steps) => {
        const tracker = createRewardTracker(config, { rows: goldRows });
        for (const step of steps) {
          const b = tracker.onStep(step);
          expect(b.dense).toBeGreaterThanOrEqual(config.stepClipMin);
          expect(b.dense).toBeLessThanOrEqual(config.stepClipMax);
          expect(b.total).toBe(b.dense);
          expect(b.terminal).toBe(0);
          expect(b.dense_unclipped).toBeCloseTo(b.operational + b.progress, 9);
          expect([0, 0.25, 0.5, 0.75, 1]).toContain(b.potential);
          if (step.actionType !== 'QUERY' || !step.ok) expect(b.progress).toBe(0);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('penalises any repeat of an action, however its argument is cased or spaced', () => {
    fc.assert(
      fc.property(stepArb, fc.boolean(), (step, ok) => {
        const tracker = createRewardTracker(config, { rows: goldRows });
        tracker.onStep(step);
        const upper = step.argument.toUpperCase();
        const argument = step.actionType === 'QUERY' ? `  ${upper.replaceAll(' ', '\n ')} ;` : ` ${upper}\t`;
        const variant = { ...step, argument, ok };
        const repeat = tracker.onStep(variant);
        const expected = (ok ? config.executedBonus : 0) - config.stepCost - config.repeatPenalty;
        expect(repeat.operational).toBeCloseTo(expected, 9);
      }),
    );
  });

  it('keeps a correct answer dominant: an episode ending wrong never totals 0.6', () => {
    // Bound: 15 steps × +0.01 L1, + 0.15 telescoped progress, + ≤ 0.04 per
    // clipped Φ drop from 1 to 0 (at most 7) ≈ 0.58 in the worst case.
    fc.assert(
      fc.property(fc.array(stepArb, { maxLength: 15 }), fc.boolean(), (steps, exhaust) => {
        const tracker = createRewardTracker(config, { rows: goldRows });
        for (const step of steps) tracker.onStep(step);
        if (exhaust) tracker.onBudgetExhausted();
        else tracker.onAnswer(false);
        expect(tracker.totalReward).toBeLessThan(0.6);
      }),
      { numRuns: 500 },
    );
  });

  it('bounds the worst case: farming the clip asymmetry (Φ 1 → 0 → 1 …) over 15 steps earns 0.5', () => {
    const tracker = createRewardTracker(config, { rows: goldRows });
    for (let i = 0; i < 15; i += 1) {
      // Every query is new (no repeat penalty); even ones return the gold rows, odd ones nothing.
      tracker.onStep({ actionType: 'QUERY', argument: `SELECT name, age FROM people LIMIT ${100 + i}`, ok: true, rows: i % 2 === 0 ? goldRows : [] });
    }
    tracker.onBudgetExhausted();
    expect(tracker.totalReward).toBeCloseTo(8 * 0.15 - 7 * 0.1, 9);
  });

  it('gives the same rewards from a cached GoldProfile as from the rows', () => {
    fc.assert(
      fc.property(fc.array(stepArb, { maxLength: 8 }), (steps) => {
        const fromRows = createRewardTracker(config, { rows: goldRows });
        const fromProfile = createRewardTracker(config, profileGold(goldRows));
        for (const step of steps) expect(fromProfile.onStep(step)).toEqual(fromRows.onStep(step));
      }),
    );
  });
});

describe('reward tracker (worked figures)', () => {
  it('scores the oracle episode DESCRIBE, DESCRIBE, QUERY(gold), ANSWER at ≈1.17', () => {
    const tracker = createRewardTracker(config, { rows: goldRows });
    const describe1 = tracker.onStep({ actionType: 'DESCRIBE', argument: 'people', ok: true });
    const describe2 = tracker.onStep({ actionType: 'DESCRIBE', argument: 'pets', ok: true });
    const query = tracker.onStep({ actionType: 'QUERY', argument: 'SELECT name, age FROM people', ok: true, rows: goldRows });
    const answer = tracker.onAnswer(true);
    expect(describe1).toEqual({ operational: 0.01, progress: 0, potential: 0, terminal: 0, dense_unclipped: 0.01, dense: 0.01, total: 0.01 });
    expect(describe2.total).toBe(0.01);
    expect(query).toMatchObject({ operational: 0.01, progress: 0.15, potential: 1, dense_unclipped: 0.16, dense: 0.15 });
    expect(answer).toEqual({ operational: 0, progress: 0, potential: 1, terminal: 1, dense_unclipped: 0, dense: 0, total: 1 });
    expect(tracker.totalReward).toBeCloseTo(1.17, 9);
    expect(tracker.done).toBe(true);
  });

  it('gives a wrong answer answerSimilarityScale × its similarity as partial credit, a right one terminalCorrect', () => {
    const partial = parseRewardConfig({ answerSimilarityScale: 0.5 });
    const near = createRewardTracker(partial, { rows: goldRows });
    expect(near.onAnswer(false, 0.8)).toMatchObject({ terminal: 0.4, total: 0.4 });
    expect(createRewardTracker(partial, { rows: goldRows }).onAnswer(true, 0.8).terminal).toBe(1);
    expect(createRewardTracker(partial, { rows: goldRows }).onAnswer(false, 7).terminal).toBe(0.5); // clamped to [0, 1]
    expect(createRewardTracker(config, { rows: goldRows }).onAnswer(false, 0.8).terminal).toBe(0); // the original: none
    expect(() => parseRewardConfig({ answerSimilarityScale: 1 })).toThrow(/answerSimilarityScale/);
    expect(() => parseRewardConfig({ answerSimilarityScale: -0.1 })).toThrow(/answerSimilarityScale/);
  });

  it('keeps a random-ish exploring agent small', () => {
    const tracker = createRewardTracker(config, { rows: goldRows });
    tracker.onStep({ actionType: 'SAMPLE', argument: 'pets', ok: true });
    tracker.onStep({ actionType: 'DESCRIBE', argument: 'owners', ok: false });
    tracker.onStep({ actionType: 'QUERY', argument: 'SELECT * FROM pets', ok: true, rows: [['Rex', 'dog', 3]] });
    tracker.onStep({ actionType: 'SAMPLE', argument: 'pets', ok: true });
    tracker.onStep({ actionType: 'QUERY', argument: 'SELEC', ok: false });
    tracker.onAnswer(false);
    expect(tracker.totalReward).toBeCloseTo(0.01 - 0.02 + 0.01 - 0.03 - 0.02, 9);
  });

  it('penalises a regression: a worse query after a good one', () => {
    const tracker = createRewardTracker(config, { rows: goldRows });
    tracker.onStep({ actionType: 'QUERY', argument: 'SELECT name, age FROM people', ok: true, rows: goldRows });
    const worse = tracker.onStep({ actionType: 'QUERY', argument: 'SELECT name FROM people', ok: true, rows: [['Alice'], ['Bob'], ['Carol']] });
    expect(worse.progress).toBeLessThan(0);
    expect(worse.potential).toBeLessThan(1);
    expect(tracker.currentPotential).toBe(worse.potential);
  });

  it('charges failed actions the step cost and leaves Φ alone', () => {
    const tracker = createRewardTracker(config, { rows: goldRows });
    tracker.onStep({ actionType: 'QUERY', argument: 'SELECT name, age FROM people', ok: true, rows: goldRows });
    const failed = tracker.onStep({ actionType: 'QUERY', argument: 'SELECT nme FROM people', ok: false });
    expect(failed).toMatchObject({ operational: -0.02, progress: 0, potential: 1, total: -0.02 });
    const failedAgain = tracker.onStep({ actionType: 'QUERY', argument: 'select nme from people', ok: false });
    expect(failedAgain.total).toBe(-0.05);
  });

  it('ends the episode on budget exhaustion with a terminal-only breakdown', () => {
    const tracker = createRewardTracker(config, { rows: goldRows });
    const last = tracker.onStep({ actionType: 'DESCRIBE', argument: 'people', ok: true });
    const end = tracker.onBudgetExhausted();
    expect(end).toEqual({ operational: 0, progress: 0, potential: 0, terminal: 0, dense_unclipped: 0, dense: 0, total: 0 });
    expect(combineBreakdowns(last, end)).toEqual(last);
    expect(() => tracker.onStep({ actionType: 'DESCRIBE', argument: 'people', ok: true })).toThrow(AppError);
    expect(() => tracker.onAnswer(true)).toThrow(/after the episode ended/);
  });

  it('does not count the same table across DESCRIBE and SAMPLE as a repeat', () => {
    const tracker = createRewardTracker(config, { rows: goldRows });
    tracker.onStep({ actionType: 'DESCRIBE', argument: 'people', ok: true });
    expect(tracker.onStep({ actionType: 'SAMPLE', argument: '"People"', ok: true }).total).toBe(0.01);
    expect(tracker.onStep({ actionType: 'SAMPLE', argument: '[people]', ok: true }).total).toBe(-0.03);
  });
});

describe('parseRewardConfig', () => {
  it('fills defaults and rejects inconsistent or unknown settings', () => {
    expect(config).toMatchObject({ executedBonus: 0.02, repeatPenalty: 0.03, stepCost: 0.02, potentialBins: 5, stepClipMin: -0.1, stepClipMax: 0.15 });
    expect(parseRewardConfig({ progressScale: 0.3 }).progressScale).toBe(0.3);
    expect(() => parseRewardConfig({ stepClipMin: 0.2, stepClipMax: 0.1 })).toThrow(/stepClipMin/);
    expect(() => parseRewardConfig({ repeatPenalty: -0.03 })).toThrow(/repeatPenalty/);
    expect(() => parseRewardConfig({ cardinalityWeight: 0, valueOverlapWeight: 0, numericRangeWeight: 0 })).toThrow(/weight/);
    expect(() => parseRewardConfig({ stepcost: 0.01 })).toThrow(/stepcost/);
  });
});
