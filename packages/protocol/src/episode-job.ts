import { z } from 'zod';
import { SplitName } from './question.ts';

/**
 * Contracts of the distributed rollout: the run spec every process of a run
 * reads, the group (parent) and episode (child) job payloads, the small
 * reference an episode job returns, the scored group the trainer consumes and
 * the notices the trainer publishes. Jobs carry references (episode ids),
 * never trajectories: those live in the trajectory store.
 */

/** Run ids end up in Redis keys, queue prefixes and job ids: keep them to a safe alphabet. */
export const RunIdSchema = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,64}$/, 'run id: 1–64 characters of A–Z a–z 0–9 _ -');

export const AdvantageMode = { GRPO: 'grpo', DR_GRPO: 'dr_grpo' } as const;
export type AdvantageMode = (typeof AdvantageMode)[keyof typeof AdvantageMode];

const count = z.number().int().nonnegative();
const positive = z.number().int().positive();

/**
 * Everything about a run that the coordinator, the workers and the trainer must
 * agree on. Written once by the coordinator; workers and the trainer read it.
 * Defaults live here and only here.
 */
export const RolloutRunSpecSchema = z.strictObject({
  run_id: RunIdSchema,
  /** 'builtin' or a Spider-layout directory readable by every worker (a shared volume in docker). */
  dataset: z.string().min(1).default('builtin'),
  /** Questions are drawn from this split (all questions when the dataset has no such split). */
  split: SplitName.default('train'),
  /** Policy name resolved by each worker: oracle | random | scripted (LLM policies plug in here). */
  policy: z.string().min(1).default('oracle'),
  /** Episodes in the run; a multiple of group_size. May exceed the number of questions (they are drawn again). */
  episodes: positive,
  /** G: episodes per GRPO group; all G play the same question. */
  group_size: positive.default(4),
  /** B: groups per trainer batch. */
  groups_per_batch: positive.default(4),
  /** How many policy versions a sample may lag behind the trainer; 0 = synchronous. */
  max_staleness: count.default(0),
  /** Base seed: question order and every episode seed derive from it. */
  seed: count.default(0),
  /** Attempts per episode (1 = no retry); each attempt plays in a fresh environment. */
  attempts: positive.default(3),
  /** Base of the exponential retry backoff, in milliseconds. */
  backoff_ms: count.default(250),
  /** GRPO `(r − mean)/(std + 1e-4)` or Dr. GRPO `r − mean`. */
  advantage: z.enum([AdvantageMode.GRPO, AdvantageMode.DR_GRPO]).default(AdvantageMode.GRPO),
  /** Drop groups whose rewards are all equal (no learning signal) instead of training on them. */
  drop_zero_variance: z.boolean().default(true),
  /** Safety net on policy turns per episode; the environment's own step budget normally ends it first. */
  max_turns: positive.default(40),
});
export type RolloutRunSpec = z.infer<typeof RolloutRunSpecSchema>;
export type RolloutRunSpecInput = z.input<typeof RolloutRunSpecSchema>;

/** Parent job of a flow: one GRPO group. */
export const GroupJobSchema = z.strictObject({
  run_id: RunIdSchema,
  group_id: z.string().min(1),
  /** Admission sequence number (0, 1, 2, ...): the trainer consumes groups in this order. */
  seq: count,
  /** Nominal step = seq div groups_per_batch, and group = seq mod groups_per_batch (job-id naming). */
  step: count,
  group: count,
  question_id: z.string().min(1),
  db_id: z.string().min(1),
  group_size: positive,
  /** Trainer policy version when the coordinator admitted the group. */
  admitted_version: count,
});
export type GroupJob = z.infer<typeof GroupJobSchema>;

/** Child job of a flow: one episode. */
export const EpisodeJobSchema = z.strictObject({
  run_id: RunIdSchema,
  group_id: z.string().min(1),
  /** The group's admission sequence number. */
  group_seq: count,
  /** Index of the episode in its group (0 .. G−1). */
  index: count,
  /** Also the job id, so a retry or a re-enqueue never duplicates it. */
  episode_id: z.string().min(1),
  question_id: z.string().min(1),
  db_id: z.string().min(1),
  /** Seed handed to the environment reset and to the policy. */
  seed: count,
  /** Workers never sample with an older policy than this (the coordinator saw it when admitting). */
  admitted_version: count,
});
export type EpisodeJob = z.infer<typeof EpisodeJobSchema>;

/** What an episode job returns: a reference to the stored trajectory plus the numbers scoring needs. */
export const EpisodeResultSchema = z.strictObject({
  episode_id: z.string().min(1),
  index: count,
  /** Key of the trajectory in the trajectory store. */
  trajectory_key: z.string().min(1),
  reward: z.number(),
  correct: z.boolean(),
  steps: count,
  /** 1-based attempt that produced it. */
  attempt: positive,
  min_policy_version: count,
  max_policy_version: count,
});
export type EpisodeResult = z.infer<typeof EpisodeResultSchema>;

/** A finished group with its advantages, waiting in the trainer's buffer. */
export const ScoredGroupSchema = z.strictObject({
  run_id: RunIdSchema,
  group_id: z.string().min(1),
  seq: count,
  question_id: z.string().min(1),
  /** In group index order. */
  episode_ids: z.array(z.string().min(1)),
  trajectory_keys: z.array(z.string().min(1)),
  rewards: z.array(z.number()),
  advantages: z.array(z.number()),
  correct: z.array(z.boolean()),
  reward_mean: z.number(),
  reward_std: z.number().nonnegative(),
  zero_variance: z.boolean(),
  min_policy_version: count,
  max_policy_version: count,
});
export type ScoredGroup = z.infer<typeof ScoredGroupSchema>;

/** Published by the trainer on every commit; workers pick the version up at their next turn. */
export const RolloutNoticeSchema = z.strictObject({
  run_id: RunIdSchema,
  kind: z.enum(['version', 'consumed', 'done']),
  version: count,
  /** Blob-store key of the weights for `version` (null while no update has run). */
  weights_key: z.string().nullable(),
});
export type RolloutNotice = z.infer<typeof RolloutNoticeSchema>;
