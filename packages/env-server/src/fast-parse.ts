import type { ClientFrame } from '@sqlenv/protocol';

/**
 * Precompiled check for the frames a training client sends thousands of
 * times a second (step and reset); the action and reset-option checks live
 * beside their schemas in @sqlenv/protocol. Each returns the parsed value only when
 * the zod schema would certainly accept the input and produce that same
 * value; anything else returns undefined and goes through zod, which also
 * writes the validation issues. So behaviour is the schemas', at a fraction
 * of the cost on the hot path.
 */


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
