import { z } from 'zod';

/**
 * What the trainer records for every batch it trains on (stored with the
 * commit, so it survives a trainer restart and shows in the run summary).
 * Sums run in a fixed order (groups by seq, episodes by index) so two runs
 * with the same seeds give bit-identical statistics.
 */
export const BatchStatsSchema = z.strictObject({
  /** Policy version this batch produced. */
  version: z.number().int().positive(),
  /** Group ids, oldest (lowest seq) first. */
  group_ids: z.array(z.string()),
  episodes: z.number().int().nonnegative(),
  reward_mean: z.number(),
  reward_std: z.number().nonnegative(),
  success_rate: z.number().min(0).max(1),
  mean_steps: z.number().nonnegative(),
  advantage_abs_mean: z.number().nonnegative(),
  /** Oldest and newest policy version any turn of the batch was sampled with. */
  min_sampled_version: z.number().int().nonnegative(),
  max_sampled_version: z.number().int().nonnegative(),
  /** version − 1 − min_sampled_version: how far behind the trained-on samples were. */
  max_staleness: z.number().int().nonnegative(),
  /** Completion tokens with loss mask 1 (0 for text-only policies). */
  loss_tokens: z.number().int().nonnegative(),
});
export type BatchStats = z.infer<typeof BatchStatsSchema>;
