import { MAX_ARGUMENT_CHARS, actionTypes, type ClientFrame, type ResetOptions, type SqlAction } from '@sqlenv/protocol';

/**
 * Precompiled checks for the frames a training client sends thousands of
 * times a second (step and reset). Each returns the parsed value only when
 * the zod schema would certainly accept the input and produce that same
 * value; anything else returns undefined and goes through zod, which also
 * writes the validation issues. So behaviour is the schemas', at a fraction
 * of the cost on the hot path.
 */

const actionTypeSet: ReadonlySet<string> = new Set(actionTypes);
const MAX_ID_CHARS = 255;

/**
 * A plain JSON object (what JSON.parse builds), as z.record accepts it. An own
 * `__proto__` or `constructor` key is left to zod (it treats them specially).
 */
function isPlainJsonObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  if (Object.getPrototypeOf(value) !== Object.prototype) return false;
  return !Object.hasOwn(value, '__proto__') && !Object.hasOwn(value, 'constructor');
}

/** `{type: 'step', data: {...}}` or `{type: 'reset'[, data: {...}]}`; other frame types are rare and go to zod. */
export function fastClientFrame(json: Record<string, unknown>): ClientFrame | undefined {
  const keys = Object.keys(json);
  const type = json['type'];
  const data = json['data'];
  if (!Object.hasOwn(json, 'type')) return undefined;
  if (type === 'step') {
    if (keys.length !== 2 || !Object.hasOwn(json, 'data') || !isPlainJsonObject(data)) return undefined;
    return { type: 'step', data };
  }
  if (type === 'reset') {
    if (keys.length === 1) return { type: 'reset' };
    if (keys.length !== 2 || !Object.hasOwn(json, 'data')) return undefined;
    if (data === undefined) return { type: 'reset' };
    return isPlainJsonObject(data) ? { type: 'reset', data } : undefined;
  }
  return undefined;
}

/** SqlActionSchema (strict): exactly `action_type` (one of the four) and `argument` (a string within the limit). */
export function fastSqlAction(raw: unknown): SqlAction | undefined {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return undefined;
  const record = raw as Record<string, unknown>;
  const actionType = record['action_type'];
  const argument = record['argument'];
  if (typeof actionType !== 'string' || !actionTypeSet.has(actionType)) return undefined;
  if (typeof argument !== 'string' || argument.length > MAX_ARGUMENT_CHARS) return undefined;
  if (Object.keys(record).length !== 2 || !Object.hasOwn(record, 'action_type') || !Object.hasOwn(record, 'argument')) return undefined;
  return { action_type: actionType as SqlAction['action_type'], argument };
}

const idKeys: ReadonlySet<string> = new Set(['question_id', 'db_id', 'episode_id']);

/**
 * ResetOptionsSchema for the common kwargs: only string ids (question_id,
 * db_id, episode_id) within 255 characters. A seed, a split or any other key
 * goes to zod (which strips unknown keys and checks the rest).
 */
export function fastResetOptions(raw: Record<string, unknown>): ResetOptions | undefined {
  const options: ResetOptions = {};
  for (const key of Object.keys(raw)) {
    if (!idKeys.has(key)) return undefined;
    const value = raw[key];
    if (value === undefined) continue;
    if (typeof value !== 'string' || value.length > MAX_ID_CHARS) return undefined;
    options[key as 'question_id' | 'db_id' | 'episode_id'] = value;
  }
  return options;
}
