import { MAX_ARGUMENT_CHARS, type AnswerType, type Cell } from '@sqlenv/protocol';
import {
  FLOAT_RELATIVE_TOLERANCE,
  FloatMatch,
  matchPrepared,
  normaliseCellText,
  numbersMatch,
  parseNumber,
  prepareGold,
  shownDecimals,
  preparePrediction,
  type PreparedGold,
  type PreparedPrediction,
} from './match-cell.ts';
import { matchMultiset } from './match-multiset.ts';
import { EMPTY_RESULT_ANSWER, EMPTY_RESULT_ANSWERS } from './format-gold-answer.ts';
import { normaliseAnswerText } from './normalise-answer-text.ts';
import { listReadings, splitGoldList, tableReadings } from './split-answer.ts';

/** What the verifier needs of a question (a QuestionRecord satisfies it). */
export interface GoldAnswer {
  answer_type: AnswerType;
  gold_answer: string;
  gold_rows: Cell[][];
  gold_columns: string[];
}

export interface Verdict {
  correct: boolean;
  /** Short and human-readable: "integer mismatch: expected 25, got 24". */
  reason: string;
}

const MAX_QUOTED_CHARS = 40;

function show(text: string): string {
  return JSON.stringify(text.length > MAX_QUOTED_CHARS ? `${text.slice(0, MAX_QUOTED_CHARS)}…` : text);
}

/** The gold scalar: the first cell of the gold rows, else the stored gold text. */
function goldScalar(gold: GoldAnswer): Cell | undefined {
  const row = gold.gold_rows[0];
  if (row !== undefined && row.length > 0) return row[0];
  return gold.gold_answer.trim() === '' ? undefined : gold.gold_answer;
}

function verifyNumber(text: string, gold: GoldAnswer, kind: 'integer' | 'float', floatMatch: FloatMatch): Verdict {
  const cell = goldScalar(gold);
  if (cell === undefined) return { correct: false, reason: 'no gold answer' };
  const goldValue = typeof cell === 'number' ? cell : typeof cell === 'string' ? parseNumber(normaliseCellText(cell)) : undefined;
  if (goldValue === undefined) {
    // A non-numeric gold under a numeric type (a dataset quirk): compare as a plain cell.
    const correct = matchPrepared(preparePrediction(text), prepareGold(cell), 'auto', floatMatch);
    return { correct, reason: correct ? `${kind} match` : `${kind} mismatch: expected ${show(String(cell))}, got ${show(text)}` };
  }
  const value = parseNumber(normaliseCellText(text));
  if (value === undefined) return { correct: false, reason: `${kind} mismatch: expected ${goldValue}, got non-number ${show(text)}` };
  const correct = numbersMatch(value, goldValue, kind === 'integer' ? 'exact' : 'tolerant', floatMatch);
  if (correct) return { correct, reason: `${kind} match` };
  const tolerance = kind === 'integer' ? '' : floatMatch === FloatMatch.RELATIVE ? ` (±${FLOAT_RELATIVE_TOLERANCE * 100}%)` : ` (at ${shownDecimals(goldValue)} decimal${shownDecimals(goldValue) === 1 ? '' : 's'})`;
  return { correct, reason: `${kind} mismatch: expected ${goldValue}${tolerance}, got ${value}` };
}

function verifyString(text: string, gold: GoldAnswer, floatMatch: FloatMatch): Verdict {
  const cell = goldScalar(gold);
  if (cell === undefined) return { correct: false, reason: 'no gold answer' };
  const correct = matchPrepared(preparePrediction(text), prepareGold(cell), 'auto', floatMatch);
  return { correct, reason: correct ? 'string match' : `string mismatch: expected ${show(cell === null ? 'NULL' : String(cell))}, got ${show(text)}` };
}

function goldItems(gold: GoldAnswer): Cell[] {
  if (gold.gold_rows.length > 0) return gold.gold_rows.map((row) => row[0] ?? null);
  return gold.gold_answer.trim() === '' ? [] : splitGoldList(gold.gold_answer);
}

/** Picks the size closest to the expected one, for a helpful reason. */
function closestSize(sizes: number[], expected: number): number {
  return sizes.reduce((best, size) => (Math.abs(size - expected) < Math.abs(best - expected) ? size : best), sizes[0] ?? 0);
}

function verifyList(text: string, gold: GoldAnswer, floatMatch: FloatMatch): Verdict {
  const expected = cachedPreparation(preparedLists, gold, () => goldItems(gold).map(prepareGold));
  if (expected.length === 0) return { correct: false, reason: 'no gold items' };
  const readings = listReadings(text);
  let reason: string | undefined;
  for (const reading of readings) {
    if (reading.length !== expected.length) continue;
    const predicted = reading.map(preparePrediction);
    const outcome = matchMultiset(predicted, expected, (p, g) => matchPrepared(p, g, 'auto', floatMatch));
    if (outcome.equal) return { correct: true, reason: `list match (${expected.length} item${expected.length === 1 ? '' : 's'})` };
    const miss = outcome.unmatchedIndex === undefined ? undefined : reading[outcome.unmatchedIndex];
    reason ??= `list mismatch: ${show(miss ?? '')} is not an expected item`;
  }
  const got = closestSize(readings.map((r) => r.length), expected.length);
  return { correct: false, reason: reason ?? `list mismatch: expected ${expected.length} items, got ${got}` };
}

/**
 * Gold answers prepared for matching, per question record: a question is
 * answered many times (a GRPO group, a server under load), and preparing a
 * large gold list or table dominated the cost of checking an answer.
 * Records are treated as immutable once loaded.
 */
const preparedLists = new WeakMap<GoldAnswer, PreparedGold[]>();
const preparedTables = new WeakMap<GoldAnswer, PreparedRow<PreparedGold>[]>();

function cachedPreparation<T>(cache: WeakMap<GoldAnswer, T>, gold: GoldAnswer, prepare: () => T): T {
  let prepared = cache.get(gold);
  if (prepared === undefined) {
    prepared = prepare();
    cache.set(gold, prepared);
  }
  return prepared;
}

interface PreparedRow<C> {
  readonly keys: readonly string[];
  readonly cells: readonly C[];
}

function prepareRow<C extends { keys: readonly string[] }>(cells: readonly C[]): PreparedRow<C> {
  const passes = cells[0]?.keys.length ?? 0;
  const keys = Array.from({ length: passes }, (_, pass) => cells.map((cell) => cell.keys[pass]).join('\u0001'));
  return { keys, cells };
}

function rowsMatch(p: PreparedRow<PreparedPrediction>, g: PreparedRow<PreparedGold>, floatMatch: FloatMatch): boolean {
  return p.cells.length === g.cells.length && p.cells.every((cell, index) => matchPrepared(cell, g.cells[index] as PreparedGold, 'auto', floatMatch));
}

function verifyTable(text: string, gold: GoldAnswer, floatMatch: FloatMatch): Verdict {
  const goldRows: Cell[][] =
    gold.gold_rows.length > 0 || gold.gold_answer.trim() === ''
      ? gold.gold_rows
      : (tableReadings(gold.gold_answer, gold.gold_columns.length, [])[0] ?? []);
  if (goldRows.length === 0) return { correct: false, reason: 'no gold rows' };
  const width = Math.max(gold.gold_columns.length, goldRows[0]?.length ?? 0);
  const expected = cachedPreparation(preparedTables, gold, () => goldRows.map((row) => prepareRow(row.map(prepareGold))));
  const readings = tableReadings(text, width, gold.gold_columns);
  let reason: string | undefined;
  for (const reading of readings) {
    if (reading.length !== expected.length) continue;
    const badRow = reading.findIndex((row) => row.length !== width);
    if (badRow >= 0) {
      reason ??= `table mismatch: row ${badRow + 1} has ${reading[badRow]?.length ?? 0} cells, expected ${width}`;
      continue;
    }
    const predicted = reading.map((row) => prepareRow(row.map(preparePrediction)));
    const outcome = matchMultiset(predicted, expected, (p, g) => rowsMatch(p, g, floatMatch));
    if (outcome.equal) return { correct: true, reason: `table match (${expected.length} row${expected.length === 1 ? '' : 's'})` };
    const miss = outcome.unmatchedIndex === undefined ? undefined : reading[outcome.unmatchedIndex];
    reason ??= `table mismatch: row ${show((miss ?? []).join(' | '))} is not an expected row`;
  }
  const got = closestSize(readings.map((r) => r.length), expected.length);
  return { correct: false, reason: reason ?? `table mismatch: expected ${expected.length} rows, got ${got}` };
}

/** A gold query that returned no rows is answered by saying so ("none", "no rows", ...). */
function verifyEmpty(text: string): Verdict {
  const folded = text.trim().toLowerCase().replace(/\s+/g, ' ').replace(/\.$/, '');
  const correct = EMPTY_RESULT_ANSWERS.has(folded);
  return { correct, reason: correct ? 'empty result match' : `expected an empty result ("${EMPTY_RESULT_ANSWER}"), got ${show(text)}` };
}

function verifyText(text: string, gold: GoldAnswer, floatMatch: FloatMatch): Verdict {
  if (gold.gold_rows.length === 0 && gold.gold_answer.trim().toLowerCase() === EMPTY_RESULT_ANSWER) return verifyEmpty(text);
  switch (gold.answer_type) {
    case 'integer':
    case 'float':
      return verifyNumber(text, gold, gold.answer_type, floatMatch);
    case 'string':
      return verifyString(text, gold, floatMatch);
    case 'list':
      return verifyList(text, gold, floatMatch);
    case 'table':
      return verifyTable(text, gold, floatMatch);
  }
}

/**
 * Type-aware answer check (docs/architecture.md, "The environment"):
 * integer exact after numeric coercion ("25.0", "1,234"); float within 1 %
 * relative (1e-9 absolute near 0), or with `floatMatch: 'precision'` rounded
 * at the gold's shown decimals (see FloatMatch); string trimmed and case-insensitive;
 * list and table order-insensitive multisets whose cells follow the scalar
 * rules. The answer is first stripped of an LLM's wrapping
 * (normaliseAnswerText); the untouched text is tried too, so a gold value that
 * itself looks like wrapping still matches. An empty answer is always wrong, and so is one over MAX_ARGUMENT_CHARS.
 */
export function verifyAnswer(predicted: string, gold: GoldAnswer, floatMatch: FloatMatch = FloatMatch.RELATIVE): Verdict {
  // No action can carry a longer answer, and a question whose canonical answer is
  // longer is left out of the playable set (dataset loader): checking the length
  // first keeps the cost of a hostile answer bounded, whatever its size.
  if (predicted.length > MAX_ARGUMENT_CHARS) return { correct: false, reason: `answer too long: ${predicted.length} characters (the limit is ${MAX_ARGUMENT_CHARS})` };
  const raw = predicted.trim();
  if (raw === '') return { correct: false, reason: 'empty answer' };
  const unwrapped = normaliseAnswerText(raw);
  const verdict: Verdict = unwrapped === '' ? { correct: false, reason: 'empty answer' } : verifyText(unwrapped, gold, floatMatch);
  if (verdict.correct) return verdict;
  if (raw !== unwrapped && verifyText(raw, gold, floatMatch).correct) return { correct: true, reason: `${gold.answer_type} match` };
  return verdict;
}
