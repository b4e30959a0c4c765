import { describe, expect, it } from 'vitest';
import { formatGoldAnswer } from './format-gold-answer.ts';
import { deriveAnswerType } from './derive-answer-type.ts';
import { normaliseAnswerText } from './normalise-answer-text.ts';

describe('deriveAnswerType', () => {
  it('decides by shape, then by the single cell', () => {
    expect(deriveAnswerType(['n'], [[25]])).toBe('integer');
    expect(deriveAnswerType(['avg'], [[2.5]])).toBe('float');
    expect(deriveAnswerType(['name'], [['Paris']])).toBe('string');
    expect(deriveAnswerType(['zip'], [['02134']])).toBe('string'); // numeric text stays text
    expect(deriveAnswerType(['m'], [[null]])).toBe('string');
    expect(deriveAnswerType(['name'], [['a'], ['b']])).toBe('list');
    expect(deriveAnswerType(['name'], [])).toBe('list');
    expect(deriveAnswerType(['name', 'age'], [['a', 1]])).toBe('table'); // one row, several columns
    expect(deriveAnswerType(['name', 'age'], [])).toBe('table');
  });
});

describe('formatGoldAnswer', () => {
  it('writes the canonical text the oracle submits', () => {
    expect(formatGoldAnswer('integer', [[25]])).toBe('25');
    expect(formatGoldAnswer('float', [[0.1 + 0.2]])).toBe('0.30000000000000004');
    expect(formatGoldAnswer('string', [['Paris']])).toBe('Paris');
    expect(formatGoldAnswer('string', [[null]])).toBe('NULL');
    expect(formatGoldAnswer('list', [['a'], ['b'], ['c']])).toBe('a, b, c');
    expect(formatGoldAnswer('list', [['x, y'], ['z']])).toBe('x, y\nz');
    expect(formatGoldAnswer('list', [[''], ['z']])).toBe('"", z');
    expect(formatGoldAnswer('table', [['a', 1], ['b|c', null]])).toBe('a | 1\nb\\|c | NULL');
    expect(formatGoldAnswer('list', [])).toBe('none');
  });
});

describe('normaliseAnswerText', () => {
  it('strips nested wrapping', () => {
    expect(normaliseAnswerText('**Answer:** ```sql\n42\n```')).toBe('42');
    expect(normaliseAnswerText('Final Answer: "Paris".')).toBe('Paris');
    expect(normaliseAnswerText('The answer is `7`')).toBe('7');
    expect(normaliseAnswerText('<answer> a, b </answer>')).toBe('a, b');
    expect(normaliseAnswerText('$\\boxed{3.5}$')).toBe('3.5');
    expect(normaliseAnswerText('```\na | 1\nb | 2\n```')).toBe('a | 1\nb | 2');
  });

  it('leaves content alone', () => {
    expect(normaliseAnswerText('Answer')).toBe('Answer');
    expect(normaliseAnswerText('There are 25 employees')).toBe('There are 25 employees');
    expect(normaliseAnswerText('...')).toBe('...');
    expect(normaliseAnswerText('   ')).toBe('');
  });
});
