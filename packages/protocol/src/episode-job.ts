import { z } from 'zod';
import { AppError, ErrorCode } from '@sqlenv/shared';
import { SplitName } from './question.ts';

/**
 * Contracts of the distributed rollout: the run spec every process of a run
 * reads, the group (parent) and episode (child) job payloads, the small
 * reference an episode job returns, the scored group the trainer consumes and
 * the notices the trainer publishes. Jobs carry references (episode ids),
 * never trajectories: those live in the trajectory store.
 */

/**
 * Run ids end up in Redis keys, SCAN patterns, queue prefixes, job ids and directory names: keep
 * them to an alphabet with no glob character (`* ? [ ] \`), no path separator and no `.`, so an id
 * can only ever name itself. Every place a run id enters (command line, environment, job payload,
 * run spec, Redis keys that list runs) goes through this one schema.
 */
export const RUN_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
export const RunIdSchema = z.string().regex(RUN_ID_PATTERN, 'run id: 1–64 characters of A–Z a–z 0–9 _ -');

/** A run id from `source` (an option, a variable, a Redis entry), or AppError VALIDATION naming both. */
export function parseRunId(value: unknown, source: string): string {
  const parsed = RunIdSchema.safeParse(value);
  if (parsed.success) return parsed.data;
  throw new AppError(ErrorCode.VALIDATION, `${source}: ${JSON.stringify(value)} is not a run id (1–64 characters of A–Z a–z 0–9 _ -; no wildcards)`);
}

export const AdvantageMode = { GRPO: 'grpo', DR_GRPO: 'dr_grpo' } as const;
export type AdvantageMode = (typeof AdvantageMode)[keyof typeof AdvantageMode];

const count = z.number().int().nonnegative();
const positive = z.number().int().positive();

/** Projections a LoRA adapter may target (PEFT `target_modules` names of Qwen/Llama decoders). */
export const LORA_TARGET_NAMES = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] as const;

/**
 * The model section of a run spec (`policy: 'model'`): what every worker must
 * agree on to play with the same policy and what the trainer needs to train
 * it. The model directory itself is each process's own `--model DIR` (a path
 * may differ between machines); `fingerprint` makes sure it is the same model.
 */
export const RunModelSpecSchema = z.strictObject({
  /** `modelFingerprint(dir)` of the model directory (config, tokenizer, checkpoint layout): a worker whose --model differs refuses the run. */
  fingerprint: z.string().min(1),
  /** LoRA adapter shape (the graph inputs every worker builds and the trainer trains). */
  lora: z
    .strictObject({
      rank: positive.default(8),
      alpha: z.number().positive().default(16),
      targets: z.array(z.enum(LORA_TARGET_NAMES)).nonempty().default([...LORA_TARGET_NAMES]),
    })
    .prefault({}),
  /** How completions are sampled; the trainer recomputes log-probs at this temperature. */
  sampling: z
    .strictObject({
      /** 1 is the usual RL choice: samples follow the policy the loss differentiates. 0 = greedy. */
      temperature: z.number().nonnegative().default(1),
      top_p: z.number().gt(0).max(1).default(1),
      top_k: count.default(0),
    })
    .prefault({}),
  /** Most tokens the model may write in one turn (a tool call); the turn stops earlier at `<|im_end|>`. */
  max_new_tokens: positive.default(256),
  /**
   * Tokens of the whole episode (prompt, observations and completions), at most the model's
   * max_position_embeddings (null: exactly that). 4,096 by default: every turn's prefill holds
   * attention scores that grow with the square of the context, so a 40k-token Qwen3 limit would
   * be gigabytes per turn.
   */
  context_tokens: positive.nullable().default(4096),
  /** The prompt file's text (every worker uses the same prompt); null = the built-in default prompt. */
  prompt: z.string().nullable().default(null),
  /** A PEFT adapter directory (readable by every process) that is policy version 0; null = the base model. */
  adapter: z.string().nullable().default(null),
  /** Qwen3 thinking mode: false puts the empty think block in the generation prompt (Qwen3 templates only). */
  thinking: z.boolean().default(false),
  /**
   * The trainer's learner settings (loss, optimizer, micro-batches) as the grpo package's
   * LearnerConfigSchema reads them; the coordinator validates them when it registers the run, and
   * defaults live in that schema only. Empty = every default.
   */
  learner: z.record(z.string(), z.unknown()).default({}),
});
export type RunModelSpec = z.infer<typeof RunModelSpecSchema>;
export type RunModelSpecInput = z.input<typeof RunModelSpecSchema>;

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
  /** Policy name resolved by each worker: oracle | random | model (the LLM agent; needs `model`). */
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
  /**
   * λ that multiplies every negative advantage (1: GRPO as published; 0: only the better-than-average
   * episodes are reinforced, "positive sample reinforcement", Zhu et al. 2025, "The Surprising
   * Effectiveness of Negative Reinforcement in LLM Reasoning"). Pushing down sampled tokens raises the
   * entropy of the rest; with few successes that dominates a small model's updates.
   */
  negative_advantage_weight: z.number().min(0).max(1).default(1),
  /** Drop groups whose rewards are all equal (no learning signal) instead of training on them. */
  drop_zero_variance: z.boolean().default(true),
  /**
   * Reward settings of this run's environments over the environment's defaults (the sql-env package's
   * RewardConfigSchema, e.g. `{"answerSimilarityScale": 0.5}`); validated when the run is made. Empty =
   * the environment's reward. In-process environments only (a remote env-server has its own).
   */
  reward: z.record(z.string(), z.unknown()).default({}),
  /** Safety net on policy turns per episode; the environment's own step budget normally ends it first. */
  max_turns: positive.default(40),
  /** The LLM policy's settings; required when `policy` is 'model', absent otherwise. */
  model: RunModelSpecSchema.optional(),
}).superRefine((spec, ctx) => {
  if (spec.policy === 'model' && spec.model === undefined) ctx.addIssue({ code: 'custom', path: ['model'], message: "policy 'model' needs the model section" });
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
