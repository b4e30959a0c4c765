import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { answerSimilarity } from './answer-similarity.ts';

describe('answerSimilarity', () => {
  it('is 1 for the same text up to case, separators and LLM wrapping, 0 without a common bigram', () => {
    expect(answerSimilarity('Answer: `Grace Chen, Lars Wang`', 'grace chen,lars wang')).toBe(1);
    expect(answerSimilarity('a | b', 'A, B')).toBe(1);
    expect(answerSimilarity('xyz', 'Grace')).toBe(0);
    expect(answerSimilarity('', 'Grace')).toBe(0);
    expect(answerSimilarity('7', '8')).toBe(0);
  });

  it('is the Dice coefficient of the character-bigram multisets (worked figures)', () => {
    // "schmidt" {sc ch hm mi id dt} vs "fchmidt" {fc ch hm mi id dt}: 5 common of 6 + 6.
    expect(answerSimilarity('Fchmidt', 'Schmidt')).toBeCloseTo(10 / 12, 12);
    // "231.1" {23 31 1. .1} vs "231.4" {23 31 1. .4}: 3 common of 4 + 4.
    expect(answerSimilarity('231.4', '231.1')).toBeCloseTo(6 / 8, 12);
    // repeated bigrams count by multiplicity: "aaa" {aa aa} vs "aa" {aa}: 1 common of 2 + 1.
    expect(answerSimilarity('aaa', 'aa')).toBeCloseTo(2 / 3, 12);
  });

  it('ranks a near miss above a wild guess, and a list with one wrong item above half the list', () => {
    const gold = 'Hiking Socks, Leather Belt, Running Shoes';
    const oneWrong = answerSimilarity('Hiking Socks, Leather Belt, Rain Jacket', gold);
    const half = answerSimilarity('Hiking Socks', gold);
    expect(oneWrong).toBeGreaterThan(half);
    expect(half).toBeGreaterThan(answerSimilarity('Yoga Mat', gold));
  });

  it('stays in [0, 1] and is symmetric on plain texts', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 40 }), fc.string({ maxLength: 40 }), (a, b) => {
        const s = answerSimilarity(a, b);
        expect(s).toBeGreaterThanOrEqual(0);
        expect(s).toBeLessThanOrEqual(1);
      }),
    );
    fc.assert(
      fc.property(fc.stringMatching(/^[a-z0-9 ]{0,30}$/), fc.stringMatching(/^[a-z0-9 ]{0,30}$/), (a, b) => {
        expect(answerSimilarity(a, b)).toBeCloseTo(answerSimilarity(b, a), 12);
      }),
    );
  });
});
