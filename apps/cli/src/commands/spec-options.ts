import { z } from 'zod';
import { RolloutRunSpecSchema, RunIdSchema, type RolloutRunSpec, type RunModelSpec } from '@sqlenv/protocol';
import { AppError, ErrorCode, formatZodIssues } from '@sqlenv/shared';
import { parseRewardConfig } from '@sqlenv/sql-env';
import { totalGroups } from '@sqlenv/rollout';
import { booleanText, jsonObjectOption, MAX_EPISODES, type FlagSpec } from '../flags.ts';

/** Run-spec options of `sqlenv coordinator` and `sqlenv train`; their defaults live in RolloutRunSpecSchema. */
export const specOptionSpecs: Record<string, FlagSpec> = {
  run: { key: 'run_id', env: 'RUN_ID' },
  dataset: { key: 'dataset', env: 'SQLENV_DATASET' },
  split: { key: 'split', env: 'SQLENV_SPLIT' },
  policy: { key: 'policy', env: 'SQLENV_POLICY' },
  episodes: { key: 'episodes', env: 'SQLENV_EPISODES' },
  'group-size': { key: 'group_size', env: 'SQLENV_GROUP_SIZE' },
  'groups-per-batch': { key: 'groups_per_batch', env: 'SQLENV_GROUPS_PER_BATCH' },
  'max-staleness': { key: 'max_staleness', env: 'SQLENV_MAX_STALENESS' },
  seed: { key: 'seed', env: 'SQLENV_SEED' },
  attempts: { key: 'attempts', env: 'SQLENV_ATTEMPTS' },
  'backoff-ms': { key: 'backoff_ms', env: 'SQLENV_BACKOFF_MS' },
  advantage: { key: 'advantage', env: 'SQLENV_ADVANTAGE' },
  'negative-weight': { key: 'negative_advantage_weight', env: 'SQLENV_NEGATIVE_WEIGHT' },
  'drop-zero-variance': { key: 'drop_zero_variance', env: 'SQLENV_DROP_ZERO_VARIANCE' },
  'max-turns': { key: 'max_turns', env: 'SQLENV_MAX_TURNS' },
  reward: { key: 'reward', env: 'SQLENV_REWARD' },
};

const int = z.coerce.number().int();

/** Text → typed spec fields; undefined stays undefined so the spec schema applies its defaults. */
export const SpecOptionsSchema = z.object({
  run_id: RunIdSchema.optional(),
  dataset: z.string().optional(),
  split: z.string().optional(),
  policy: z.string().optional(),
  /** At most MAX_EPISODES: a run beyond it is a typo, not a plan (it would be refused after hours). */
  episodes: int.positive().max(MAX_EPISODES, 'a bound no run needs: split larger work into several runs').optional(),
  group_size: int.optional(),
  groups_per_batch: int.optional(),
  max_staleness: int.optional(),
  seed: int.optional(),
  attempts: int.optional(),
  backoff_ms: int.optional(),
  advantage: z.string().optional(),
  negative_advantage_weight: z.coerce.number().optional(),
  drop_zero_variance: booleanText.optional(),
  max_turns: int.optional(),
  /** Reward settings as JSON (RewardConfigSchema of the sql-env package). */
  reward: z.string().optional(),
});

export function runSpecFrom(options: z.infer<typeof SpecOptionsSchema>, fallbackRunId: () => string, model?: RunModelSpec): RolloutRunSpec {
  const reward = options.reward === undefined ? undefined : rewardSettings(options.reward);
  const raw = Object.fromEntries(Object.entries({ ...options, reward, run_id: options.run_id ?? fallbackRunId(), model }).filter(([key, value]) => value !== undefined && key in RolloutRunSpecSchema.shape));
  const parsed = RolloutRunSpecSchema.safeParse(raw);
  if (!parsed.success) throw new AppError(ErrorCode.VALIDATION, `invalid run: ${formatZodIssues(parsed.error)}`);
  totalGroups(parsed.data); // episodes must fill whole groups: fail before loading anything
  return parsed.data;
}

/** `--reward` JSON → the spec's reward section, validated against the environment's reward schema so a bad setting fails before the run starts. */
function rewardSettings(text: string): Record<string, unknown> {
  const settings = jsonObjectOption(text, '--reward', '{"answerSimilarityScale":0.5}');
  parseRewardConfig(settings);
  return settings;
}
