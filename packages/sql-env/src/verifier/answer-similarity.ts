import { normaliseAnswerText } from './normalise-answer-text.ts';

/** Separators of list items and table cells, and whitespace: all read as one space. */
const SEPARATORS = /[\s,;|]+/gu;

function canonical(text: string): string {
  return text.toLowerCase().replace(SEPARATORS, ' ').trim();
}

function bigrams(text: string): Map<string, number> {
  const chars = [...text];
  const counts = new Map<string, number>();
  for (let i = 0; i + 1 < chars.length; i++) {
    const gram = `${chars[i] as string}${chars[i + 1] as string}`;
    counts.set(gram, (counts.get(gram) ?? 0) + 1);
  }
  return counts;
}

/**
 * How close an answer's text is to the gold answer's, in [0, 1]: the Dice coefficient of the two
 * multisets of character bigrams (2·|A ∩ G| / (|A| + |G|)), after the answer's LLM wrapping is
 * stripped (normaliseAnswerText) and both texts are case-folded with item separators (`,` `;` `|`)
 * and whitespace read as one space. 1 for equal texts, 0 for texts without a common bigram; a name
 * with one wrong letter or a list with one wrong item scores high, and the item order barely matters.
 * It grades near misses for a partial reward (RewardConfig.answerSimilarityScale); correctness is
 * verifyAnswer's alone.
 */
export function answerSimilarity(answer: string, gold: string): number {
  const a = canonical(normaliseAnswerText(answer));
  const g = canonical(gold);
  if (a === g) return 1;
  if ([...a].length < 2 || [...g].length < 2) return 0;
  const ga = bigrams(a);
  const gg = bigrams(g);
  let common = 0;
  let sizeA = 0;
  let sizeG = 0;
  for (const count of ga.values()) sizeA += count;
  for (const [gram, count] of gg) {
    sizeG += count;
    common += Math.min(count, ga.get(gram) ?? 0);
  }
  return (2 * common) / (sizeA + sizeG);
}
