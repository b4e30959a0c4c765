import type { Cell } from '@sqlenv/protocol';

/** Float answers pass within this relative error (docs/architecture.md, "The environment": "1 % relative tolerance"). */
export const FLOAT_RELATIVE_TOLERANCE = 0.01;
/** Below this absolute error a float answer passes even when the gold value is 0 (where 1 % of 0 is 0). */
export const FLOAT_ABSOLUTE_TOLERANCE = 1e-9;
/** In `precision` mode, a float answer also passes within this relative error (a gold shown with 17 digits). */
export const FLOAT_PRECISION_RELATIVE_TOLERANCE = 1e-6;

/**
 * How float answers are compared. `relative` (the original's verifier, the
 * default): within FLOAT_RELATIVE_TOLERANCE, so 203.6 passes for 203.5 and 48
 * for 47.99. `precision`: the answer must round to the gold value at the
 * decimals the gold shows (203.54 passes for 203.5, 203.6 does not), or lie
 * within FLOAT_PRECISION_RELATIVE_TOLERANCE of it.
 */
export const FloatMatch = { RELATIVE: 'relative', PRECISION: 'precision' } as const;
export type FloatMatch = (typeof FloatMatch)[keyof typeof FloatMatch];
export const floatMatches = Object.values(FloatMatch) as [FloatMatch, ...FloatMatch[]];

/**
 * How two numbers are compared: `exact` for integer answers, `tolerant` for
 * float answers, `auto` (list and table cells) picks exact for an
 * integer-valued gold cell and tolerant otherwise.
 */
export type NumberMode = 'exact' | 'tolerant' | 'auto';

/**
 * Spellings of SQL NULL an agent may write (after case folding). A blank cell
 * is NOT one of them: blank is how an empty string is written (`""`).
 */
const NULL_TOKENS: ReadonlySet<string> = new Set(['null', 'none', 'nil']);

// A plain decimal or scientific literal; hex, "1_000", "Infinity"-as-text etc. are not numbers here.
// `\d+(?:\.\d*)?`, not `\d+\.?\d*`: without a dot the latter splits a digit run
// between two quantifiers in every possible way before failing (quadratic:
// seconds for a 100 KB run of digits). Every pattern here is anchored and
// unambiguous, so a failed match costs time linear in the text.
export const NUMBER_RE = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?$/i;
// "1,234,567.5": thousands separators are accepted only in this strict shape.
const THOUSANDS_RE = /^[+-]?\d{1,3}(?:,\d{3})+(?:\.\d*)?$/;
const INFINITY_RE = /^([+-]?)inf(?:inity)?$/i;
const WHITESPACE_RE = /\s+/g;
const QUOTE_PAIRS: ReadonlyArray<readonly [string, string]> = [
  ['"', '"'],
  ["'", "'"],
  ['`', '`'],
  ['\u201c', '\u201d'],
  ['\u2018', '\u2019'],
];

/** Removes one pair of matching surrounding quotes, if any. */
export function stripQuotes(text: string): string {
  if (text.length < 2) return text;
  const first = text[0];
  const last = text[text.length - 1];
  for (const [open, close] of QUOTE_PAIRS) {
    if (first === open && last === close) return text.slice(1, -1);
  }
  return text;
}

/**
 * The comparable form of one answer value: trimmed, surrounding quotes and a
 * trailing period removed, inner whitespace collapsed, case folded. Applied to
 * BOTH the prediction and the gold value, so anything it drops cannot make a
 * gold answer disagree with itself.
 */
export function normaliseCellText(text: string): string {
  let current = text.trim();
  // Two rounds cover `"abc".` and `"abc."`; more wrapping than that is not a cell.
  for (let round = 0; round < 2; round += 1) {
    const before = current;
    current = stripQuotes(current).trim();
    if (current.length > 1 && current.endsWith('.') && !current.endsWith('..')) current = current.slice(0, -1).trimEnd();
    if (current === before) break;
  }
  return current.replace(WHITESPACE_RE, ' ').toLowerCase();
}

/** Parses an already normalised cell text as a number; undefined if it is not one. */
export function parseNumber(text: string): number | undefined {
  // Cheap gate: a number starts with a digit, a sign, a dot or "inf"; most text cells stop here.
  const first = text.charCodeAt(0);
  const maybeNumber = (first >= 48 && first <= 57) || first === 43 || first === 45 || first === 46 || first === 105 || first === 73;
  if (!maybeNumber) return undefined;
  let literal = text;
  if (THOUSANDS_RE.test(literal)) literal = literal.replaceAll(',', '');
  if (NUMBER_RE.test(literal)) {
    const value = Number(literal);
    return Number.isNaN(value) ? undefined : value;
  }
  const inf = INFINITY_RE.exec(literal);
  if (inf !== null) return inf[1] === '-' ? -Infinity : Infinity;
  return undefined;
}

/**
 * The number a gold TEXT cell stands for, only when the text is the number's
 * canonical spelling ("25", "2.5"), so that "007" or "1e5" stay text: a
 * zip code answered as "7" is wrong, an id stored as text answered "25.0" is not.
 */
export function canonicalNumber(text: string): number | undefined {
  const trimmed = text.trim();
  if (!NUMBER_RE.test(trimmed)) return undefined;
  const value = Number(trimmed);
  return String(value) === trimmed ? value : undefined;
}

/**
 * Decimal places of a number's canonical (shortest round-trip) spelling:
 * 203.5 → 1, 47.99 → 2, 25 → 0, 1.5e-7 → 8, 1e+21 → 0.
 */
export function shownDecimals(value: number): number {
  const text = String(Math.abs(value));
  const e = text.indexOf('e');
  const mantissa = e < 0 ? text : text.slice(0, e);
  const exponent = e < 0 ? 0 : Number(text.slice(e + 1));
  const dot = mantissa.indexOf('.');
  return Math.max(0, (dot < 0 ? 0 : mantissa.length - dot - 1) - exponent);
}

/** Compares a predicted number with a gold number under a mode (see NumberMode) and, for floats, a FloatMatch. */
export function numbersMatch(predicted: number, gold: number, mode: NumberMode, floatMatch: FloatMatch = FloatMatch.RELATIVE): boolean {
  if (predicted === gold) return true;
  const exact = mode === 'exact' || (mode === 'auto' && Number.isInteger(gold));
  if (exact) return false;
  const error = Math.abs(predicted - gold);
  // A hair of slack on each bound so that 101 vs 100 (or 203.55 vs 203.5) is not lost to binary rounding.
  if (floatMatch === FloatMatch.RELATIVE) return error <= Math.max(FLOAT_RELATIVE_TOLERANCE * Math.abs(gold) * (1 + 1e-12), FLOAT_ABSOLUTE_TOLERANCE);
  if (error <= FLOAT_PRECISION_RELATIVE_TOLERANCE * Math.abs(gold) * (1 + 1e-12)) return true;
  // Rounds to the gold at the gold's shown decimals: within half a unit of its last place (ties accepted).
  return error <= 0.5 * 10 ** -shownDecimals(gold) * (1 + 1e-9);
}

/** A predicted cell, normalised and parsed once (lists and tables compare it many times). */
export interface PreparedPrediction {
  readonly text: string;
  readonly value: number | undefined;
  /**
   * Pairing keys (see matchMultiset): [literal text, parsed value]. Equal keys
   * imply a match; the reverse does not hold (tolerance matches differ).
   */
  readonly keys: readonly [string, string];
}

/** A gold cell, normalised and parsed once. */
export interface PreparedGold {
  readonly cell: Cell;
  readonly text: string;
  /** The number to compare with: the cell itself, or the value of canonical numeric text. */
  readonly value: number | undefined;
  readonly keys: readonly [string, string];
}

export function preparePrediction(predicted: string): PreparedPrediction {
  const text = normaliseCellText(predicted);
  const value = parseNumber(text);
  const valueKey = value !== undefined ? `n:${value}` : NULL_TOKENS.has(text) ? 'null' : `t:${text}`;
  return { text, value, keys: [`t:${text}`, valueKey] };
}

export function prepareGold(cell: Cell): PreparedGold {
  if (cell === null) return { cell, text: 'null', value: undefined, keys: ['t:null', 'null'] };
  if (typeof cell === 'number') {
    // Its own spelling, normalised as a prediction would be ("Infinity" → "infinity").
    const text = normaliseCellText(String(cell));
    return { cell, text, value: cell, keys: [`t:${text}`, `n:${cell}`] };
  }
  const text = normaliseCellText(cell);
  const value = canonicalNumber(cell);
  // The value key must equal the prediction-side key of exactly the texts that
  // match: numeric-looking but non-canonical text ("007") and null-like text
  // ("None") get keys no prediction produces, and pair by text or pairwise.
  let valueKey: string;
  if (value !== undefined) valueKey = `n:${value}`;
  else if (parseNumber(text) !== undefined) valueKey = `t-num:${text}`;
  else valueKey = NULL_TOKENS.has(text) ? `t-null:${text}` : `t:${text}`;
  return { cell, text, value, keys: [`t:${text}`, valueKey] };
}

/**
 * Does a predicted cell match a gold cell? NULL accepts null, none or nil;
 * numbers compare numerically under `mode`; text compares
 * normalised, and numerically as well when the gold text is a canonical number.
 */
export function matchPrepared(predicted: PreparedPrediction, gold: PreparedGold, mode: NumberMode = 'auto', floatMatch: FloatMatch = FloatMatch.RELATIVE): boolean {
  if (gold.cell === null) return NULL_TOKENS.has(predicted.text);
  if (typeof gold.cell === 'string' && predicted.text === gold.text) return true;
  return predicted.value !== undefined && gold.value !== undefined && numbersMatch(predicted.value, gold.value, mode, floatMatch);
}

/** matchPrepared() for one-off comparisons. */
export function matchCell(predicted: string, gold: Cell, mode: NumberMode = 'auto', floatMatch: FloatMatch = FloatMatch.RELATIVE): boolean {
  return matchPrepared(preparePrediction(predicted), prepareGold(gold), mode, floatMatch);
}
