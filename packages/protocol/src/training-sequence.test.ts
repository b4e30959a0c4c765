import { describe, expect, it } from 'vitest';
import { TrajectorySchema, type Trajectory } from './trajectory.ts';
import { trainingSequence } from './training-sequence.ts';

const base: Trajectory = {
  schema_version: 2,
  run_id: 'r',
  episode_id: 'e',
  group_id: 'g',
  index: 0,
  question_id: 'q',
  db_id: 'd',
  seed: 0,
  policy: 'model',
  attempt: 1,
  worker_id: 'w',
  started_at_ms: 0,
  sampling: { temperature: 0.7, top_p: 1, top_k: 0 },
  turns: [
    { turn: 0, policy_version: 3, prompt_ids: [1, 2, 3], completion_ids: [4, 5], loss_mask: [0, 0, 0, 1, 1], logprobs: [-0.5, -0.25], action: { action_type: 'DESCRIBE', argument: 't' }, parse_error: null, policy_ms: 1 },
    { turn: 1, policy_version: 4, prompt_ids: [6], completion_ids: [7], loss_mask: [0, 1], logprobs: [-2], action: null, parse_error: 'no tool call found', policy_ms: 1 },
  ],
  steps: [],
  outcome: { correct: false, total_reward: 0, steps: 2, done_reason: 'context_exhausted', error: null },
  timings: { queue_wait_ms: 0, env_ms: 0, policy_ms: 2, total_ms: 2 },
};

describe('trainingSequence', () => {
  it('concatenates prompt ++ completion of every turn, with log-probs and versions aligned to the sampled ids', () => {
    expect(trainingSequence(TrajectorySchema.parse(base))).toEqual({
      input_ids: [1, 2, 3, 4, 5, 6, 7],
      loss_mask: [0, 0, 0, 1, 1, 0, 1],
      logprobs: [0, 0, 0, -0.5, -0.25, 0, -2],
      policy_versions: [-1, -1, -1, 3, 3, -1, 4],
      temperature: 0.7,
    });
    expect(trainingSequence({ ...base, sampling: { temperature: 0, top_p: 1, top_k: 0 } }).temperature).toBe(1); // greedy: recorded at τ = 1
  });

  it('refuses a trajectory without tokens, and keeps reading version 1 (no sampling: τ = 1)', () => {
    expect(() => trainingSequence({ ...base, turns: [] })).toThrow(/no tokens/);
    const v1 = { ...base, schema_version: 1 as const };
    delete (v1 as Partial<Trajectory>).sampling;
    expect(trainingSequence(TrajectorySchema.parse(v1)).temperature).toBe(1);
    expect(TrajectorySchema.safeParse({ ...base, sampling: undefined }).success).toBe(false); // version 2 records it
    expect(TrajectorySchema.safeParse({ ...v1, sampling: null }).success).toBe(false);
  });
});
