import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ClientFrameSchema, MAX_ARGUMENT_CHARS, ResetOptionsSchema, SqlActionSchema, fastResetOptions, fastSqlAction } from '@sqlenv/protocol';
import { fastClientFrame } from './fast-parse.ts';

// Inputs as a client can send them: JSON text, so own keys include the awkward ones.
const keyArb = fc.constantFrom('type', 'data', 'action_type', 'argument', 'question_id', 'db_id', 'episode_id', 'seed', 'split', 'extra', '__proto__', 'constructor');
const leafArb = fc.oneof(
  fc.constantFrom('step', 'reset', 'state', 'DESCRIBE', 'QUERY', 'ANSWER', 'SAMPLE', 'describe', '', 'x'.repeat(256)),
  fc.string(),
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
);
const valueArb = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: 'small' }, leafArb, fc.array(leafArb, { maxLength: 2 }), tie('object')),
  object: fc.dictionary(keyArb, tie('value'), { maxKeys: 4 }),
})).value;
const fromJson = (value: unknown): unknown => JSON.parse(JSON.stringify(value)) as unknown;

describe('fast-parse', () => {
  it('accepts only what zod accepts, with the same result', () => {
    fc.assert(
      fc.property(valueArb, (raw) => {
        const input = fromJson(raw);
        const action = fastSqlAction(input);
        if (action !== undefined) expect(SqlActionSchema.parse(input)).toEqual(action);
        if (typeof input === 'object' && input !== null && !Array.isArray(input)) {
          const record = input as Record<string, unknown>;
          const frame = fastClientFrame(record);
          if (frame !== undefined) expect(ClientFrameSchema.parse(input)).toEqual(frame);
          const options = fastResetOptions(record);
          if (options !== undefined) expect(ResetOptionsSchema.parse(input)).toEqual(options);
        }
      }),
      { numRuns: 2_000 },
    );
  });

  it('takes the hot frames on the fast path', () => {
    const action = { action_type: 'QUERY', argument: 'SELECT 1' };
    expect(fastClientFrame(fromJson({ type: 'step', data: action }) as Record<string, unknown>)).toEqual({ type: 'step', data: action });
    expect(fastClientFrame({ type: 'reset' })).toEqual({ type: 'reset' });
    expect(fastClientFrame({ type: 'reset', data: { question_id: 'q1' } })).toEqual({ type: 'reset', data: { question_id: 'q1' } });
    expect(fastSqlAction(action)).toEqual(action);
    const long = { action_type: 'QUERY', argument: 'x'.repeat(MAX_ARGUMENT_CHARS + 1) };
    expect(fastSqlAction(long)).toEqual(long);
    expect(fastResetOptions({ question_id: 'q1', db_id: 'd' })).toEqual({ question_id: 'q1', db_id: 'd' });
  });

  it('leaves edge cases to zod', () => {
    expect(fastSqlAction({ action_type: 'QUERY', argument: 'x', extra: 1 })).toBeUndefined();
    expect(fastSqlAction(Object.create({ action_type: 'QUERY', argument: 'x' }))).toBeUndefined();
    expect(fastClientFrame(JSON.parse('{"type":"step","data":{"__proto__":{}}}') as Record<string, unknown>)).toBeUndefined();
    expect(fastClientFrame({ type: 'state' })).toBeUndefined();
    expect(fastResetOptions({ seed: 3 })).toBeUndefined();
    expect(fastResetOptions({ question_id: 'x'.repeat(256) })).toBeUndefined();
  });
});
