import fc from 'fast-check';
import { describe, it } from 'vitest';
import { NUMBER_RE } from './match-cell.ts';
import { ANSWER_PREFIX_RE } from './normalise-answer-text.ts';

// The number and answer-prefix patterns were rewritten so that a failed match
// costs linear time (the former ones backtracked quadratically on long runs of
// digits or spaces). The former patterns, kept here as the oracle, must agree
// with the new ones on every input built from the characters they care about.
const FORMER_NUMBER_RE = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?$/i;
const FORMER_PREFIX_RE = /^(?:\*\*|__)?\s*(?:the\s+)?(?:final\s+)?answer(?:\s*(?:\*\*|__)?\s*[:：]|\s+is\b\s*:?)\s*(?:\*\*|__)?\s*/i;

const numberText = fc.string({ unit: fc.constantFrom('1', '0', '9', '.', 'e', 'E', '+', '-', 'x', ' '), maxLength: 12 });
const prefixParts = fc
  .array(fc.constantFrom('**', '__', ' ', '\t', 'the ', 'final ', 'Answer', 'answer', ' is', 'is', ':', '：', 'x', '25', '*', '_'), { maxLength: 6 })
  .map((parts) => parts.join(''));
// Mostly "<something> answer <something>", so that many inputs do match.
const prefixText = fc.tuple(prefixParts, fc.constantFrom('answer', 'ANSWER', ''), prefixParts).map((parts) => parts.join(''));

describe('linear rewrites of the verifier patterns', () => {
  it('NUMBER_RE accepts exactly what the former pattern accepted', () => {
    fc.assert(fc.property(numberText, (text) => NUMBER_RE.test(text) === FORMER_NUMBER_RE.test(text)), { numRuns: 5_000 });
  });

  it('ANSWER_PREFIX_RE strips exactly the prefix the former pattern stripped', () => {
    fc.assert(
      fc.property(prefixText, (text) => ANSWER_PREFIX_RE.exec(text)?.[0] === FORMER_PREFIX_RE.exec(text)?.[0]),
      { numRuns: 5_000 },
    );
  });
});
