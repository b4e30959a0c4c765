import { describe, expect, it } from 'vitest';
import type { AnswerType, Cell } from '@sqlenv/protocol';
import { formatGoldAnswer } from './format-gold-answer.ts';
import { FloatMatch, numbersMatch, shownDecimals } from './match-cell.ts';
import { verifyAnswer, type GoldAnswer } from './verify-answer.ts';

function gold(answerType: AnswerType, rows: Cell[][], columns = ['value']): GoldAnswer {
  return { answer_type: answerType, gold_answer: formatGoldAnswer(answerType, rows), gold_rows: rows, gold_columns: columns };
}

const correct = (answer: string, g: GoldAnswer, floatMatch?: FloatMatch): boolean => verifyAnswer(answer, g, floatMatch).correct;

describe('shownDecimals', () => {
  it('counts the decimals of the canonical spelling, exponent included', () => {
    expect([203.5, 47.99, 25, -0.125, 1.5e-7, 1e21, 2.5e-10, 0.30000000000000004].map(shownDecimals)).toEqual([1, 2, 0, 3, 8, 0, 11, 17]);
  });
});

describe('float answers: relative (the default) and precision-aware', () => {
  const g2035 = gold('float', [[203.5]]);
  const g4799 = gold('float', [[47.99]]);

  it('keeps the 1 % default, which accepts 203.6 for 203.5 and 48 for 47.99', () => {
    expect(correct('203.6', g2035)).toBe(true);
    expect(correct('48', g4799)).toBe(true);
    expect(correct('203.6', g2035, FloatMatch.RELATIVE)).toBe(true);
  });

  it('in precision mode, rounds the answer at the decimals the gold shows', () => {
    expect(correct('203.6', g2035, FloatMatch.PRECISION)).toBe(false);
    expect(correct('48', g4799, FloatMatch.PRECISION)).toBe(false);
    for (const answer of ['203.5', '203.50', '203.54', '203.46', '2.035e2', 'Answer: 203.5']) expect(correct(answer, g2035, FloatMatch.PRECISION), answer).toBe(true);
    for (const answer of ['47.99', '47.994', '47.986']) expect(correct(answer, g4799, FloatMatch.PRECISION), answer).toBe(true);
    expect(correct('47.996', g4799, FloatMatch.PRECISION)).toBe(false);
    expect(verifyAnswer('203.6', g2035, FloatMatch.PRECISION).reason).toBe('float mismatch: expected 203.5 (at 1 decimal), got 203.6');
  });

  it('in precision mode, also accepts 1e-6 relative: a gold shown with 17 digits', () => {
    const third = gold('float', [[10 / 3]]);
    expect(correct('3.333333', third, FloatMatch.PRECISION)).toBe(true);
    expect(correct('3.33', third, FloatMatch.PRECISION)).toBe(false);
    expect(correct('3.33', third)).toBe(true);
    expect(correct('0.3', gold('float', [[0.1 + 0.2]]), FloatMatch.PRECISION)).toBe(true);
    // 1.5e-7 shows 8 decimals: 1.54e-7 rounds to it, 1.56e-7 does not.
    expect(correct('0.000000154', gold('float', [[1.5e-7]]), FloatMatch.PRECISION)).toBe(true);
    expect(correct('0.000000156', gold('float', [[1.5e-7]]), FloatMatch.PRECISION)).toBe(false);
  });

  it('applies to float cells of lists and tables, never to integers', () => {
    const list = gold('list', [[1.25], [2.5]]);
    expect(correct('1.25, 2.5', list, FloatMatch.PRECISION)).toBe(true);
    expect(correct('1.26, 2.5', list, FloatMatch.PRECISION)).toBe(false);
    expect(correct('1.26, 2.5', list)).toBe(true);
    const table = gold('table', [['a', 2.5], ['b', 7]], ['name', 'score']);
    expect(correct('a | 2.54\nb | 7', table, FloatMatch.PRECISION)).toBe(true);
    expect(correct('a | 2.56\nb | 7', table, FloatMatch.PRECISION)).toBe(false);
    expect(correct('a | 2.5\nb | 7.01', table)).toBe(false);
    expect(numbersMatch(25.4, 25, 'exact', FloatMatch.PRECISION)).toBe(false);
  });

  it('verifies every gold float against itself in both modes', () => {
    for (const value of [203.5, 47.99, 1 / 3, 1e21, 1.5e-7, -0.125, 123456.789]) {
      const g = gold('float', [[value]]);
      expect(correct(g.gold_answer, g, FloatMatch.PRECISION), String(value)).toBe(true);
      expect(correct(g.gold_answer, g), String(value)).toBe(true);
    }
  });
});
