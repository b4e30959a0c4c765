import { z } from 'zod';
import { SplitName } from './question.ts';

/**
 * reset() options. Unknown extra kwargs are allowed on the wire (OpenEnv passes
 * them through) but only these are interpreted.
 */
export const ResetOptionsSchema = z.object({
  seed: z.number().int().nonnegative().optional(),
  episode_id: z.string().max(255).optional(),
  question_id: z.string().max(255).optional(),
  db_id: z.string().max(255).optional(),
  split: SplitName.optional(),
});
export type ResetOptions = z.infer<typeof ResetOptionsSchema>;

/** Episode state as returned by `state()` (OpenEnv: episode_id and step_count first). */
export const EpisodeStateSchema = z.object({
  episode_id: z.string().nullable(),
  step_count: z.number().int().nonnegative(),
  question_id: z.string().nullable(),
  db_id: z.string().nullable(),
  budget_remaining: z.number().int().nonnegative(),
  done: z.boolean(),
  total_reward: z.number(),
});
export type EpisodeState = z.infer<typeof EpisodeStateSchema>;
