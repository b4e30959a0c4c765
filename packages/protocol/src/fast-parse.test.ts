import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_ARGUMENT_CHARS, ResetOptionsSchema, SqlActionSchema } from './index.ts';
import { fastResetOptions, fastSqlAction } from './fast-parse.ts';

const keyArb = fc.constantFrom('action_type', 'argument', 'question_id', 'db_id', 'episode_id', 'seed', 'split', 'extra', '__proto__');
const leafArb = fc.oneof(
  fc.constantFrom('DESCRIBE', 'QUERY', 'ANSWER', 'SAMPLE', 'query', '', 'x'.repeat(256)),
  fc.string(),
  fc.integer(),
  fc.constant(null),
  fc.constant(undefined),
);
const inputArb = fc.oneof(leafArb, fc.array(leafArb, { maxLength: 2 }), fc.dictionary(keyArb, leafArb, { maxKeys: 4 }));

describe('fast-parse', () => {
  it('accepts only what zod accepts, with the same result', () => {
    fc.assert(
      fc.property(inputArb, (input) => {
        const action = fastSqlAction(input);
        if (action !== undefined) expect(SqlActionSchema.parse(input)).toEqual(action);
        const options = fastResetOptions(input);
        if (options !== undefined) expect(ResetOptionsSchema.parse(input)).toEqual(options);
      }),
      { numRuns: 2_000 },
    );
  });

  it('takes the common inputs on the fast path and leaves the rest to zod', () => {
    expect(fastSqlAction({ action_type: 'ANSWER', argument: '42' })).toEqual({ action_type: 'ANSWER', argument: '42' });
    expect(fastResetOptions({ question_id: 'q', episode_id: 'e' })).toEqual({ question_id: 'q', episode_id: 'e' });
    expect(fastResetOptions({})).toEqual({});
    // Any length: an oversized argument is the environment's to answer with an observation.
    const long = { action_type: 'ANSWER', argument: 'x'.repeat(MAX_ARGUMENT_CHARS + 1) };
    expect(fastSqlAction(long)).toEqual(long);
    expect(SqlActionSchema.parse(long)).toEqual(long);
    expect(fastResetOptions({ seed: 1 })).toBeUndefined();
  });
});
