export { verifyAnswer, type GoldAnswer, type Verdict } from './verify-answer.ts';
export { formatGoldAnswer, formatCell, NULL_TEXT, TABLE_CELL_SEPARATOR } from './format-gold-answer.ts';
export { deriveAnswerType } from './derive-answer-type.ts';
export { normaliseAnswerText } from './normalise-answer-text.ts';
export { matchCell, FLOAT_RELATIVE_TOLERANCE, FLOAT_ABSOLUTE_TOLERANCE, FLOAT_PRECISION_RELATIVE_TOLERANCE, FloatMatch, floatMatches, type NumberMode } from './match-cell.ts';
export { answerSimilarity } from './answer-similarity.ts';
