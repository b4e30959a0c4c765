import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ServerFrameSchema } from '@sqlenv/protocol';
import { fastObservationFrame } from './fast-frame.ts';

const observation = {
  question: 'How many singers?',
  schema_info: 'Tables:\n- singer',
  result: 'count(*)\n6\n(1 row)',
  error: '',
  step_count: 1,
  budget_remaining: 14,
  action_history: ['QUERY SELECT count(*) FROM singer -> 1 row'],
};
const frame = { type: 'observation', data: { observation, reward: 0.02, done: false } };

describe('fastObservationFrame', () => {
  it('takes a normal observation frame, as zod would', () => {
    expect(fastObservationFrame(frame)).toEqual(ServerFrameSchema.parse(frame));
    const reset = { type: 'observation', data: { observation: { ...observation, action_history: [] }, reward: null, done: false } };
    expect(fastObservationFrame(reset)).toEqual(ServerFrameSchema.parse(reset));
  });

  it('accepts only what the schema accepts (mutations of a valid frame)', () => {
    const keys = ['type', 'data', 'observation', 'reward', 'done', ...Object.keys(observation), 'extra'];
    const values = fc.oneof(fc.string(), fc.integer({ min: -2, max: 3 }), fc.double(), fc.boolean(), fc.constant(null), fc.array(fc.oneof(fc.string(), fc.integer()), { maxLength: 2 }));
    fc.assert(
      fc.property(fc.constantFrom('frame', 'data', 'observation'), fc.constantFrom(...keys), values, fc.boolean(), (level, key, value, remove) => {
        const copy = JSON.parse(JSON.stringify(frame)) as { data: { observation: Record<string, unknown> } & Record<string, unknown> } & Record<string, unknown>;
        const target: Record<string, unknown> = level === 'frame' ? copy : level === 'data' ? copy.data : copy.data.observation;
        if (remove) delete target[key];
        else target[key] = value;
        const fast = fastObservationFrame(JSON.parse(JSON.stringify(copy)));
        if (fast !== undefined) expect(ServerFrameSchema.parse(fast)).toEqual(fast);
      }),
      { numRuns: 2_000 },
    );
  });

  it('leaves other frames to zod', () => {
    expect(fastObservationFrame({ type: 'error', data: { message: 'x', code: 'INVALID_JSON' } })).toBeUndefined();
    expect(fastObservationFrame({ ...frame, extra: 1 })).toBeUndefined();
    expect(fastObservationFrame({ type: 'observation', data: { ...frame.data, observation: { ...observation, step_count: -1 } } })).toBeUndefined();
  });
});
