import { z } from 'zod';
import { SqlActionSchema } from './sql-action.ts';
import { RewardBreakdownSchema } from './sql-observation.ts';

/**
 * A token-exact trajectory (never re-tokenise text: the ids a model was fed
 * and sampled are the ids it is trained on; docs/async-rl.md). Stored once,
 * keyed by episode id; jobs carry only the key.
 *
 * Text-only policies (oracle, random, scripted) fill the token fields with
 * empty arrays. One training sequence is every turn's `prompt_ids ++
 * completion_ids` concatenated, in turn order (`trainingSequence()`).
 *
 * Versions: 1 = no `sampling`; 2 (what this code writes) adds `sampling`,
 * the settings the completions were drawn with (null for text policies).
 */

const tokenId = z.number().int().nonnegative();
const count = z.number().int().nonnegative();
const ms = z.number().nonnegative();

/** One policy turn: the tokens fed, the tokens sampled, and how to weigh them in the loss. */
export const TrajectoryTurnSchema = z
  .strictObject({
    turn: count,
    /** Policy version the completion was sampled with (the behaviour policy of these tokens). */
    policy_version: count,
    /** Tokens appended to the context before sampling: the prompt on turn 0, then the observation/tool tokens. */
    prompt_ids: z.array(tokenId),
    /** Tokens the policy sampled this turn. */
    completion_ids: z.array(tokenId),
    /** One entry per token of prompt_ids ++ completion_ids: 1 = trained on, 0 = context only. */
    loss_mask: z.array(z.union([z.literal(0), z.literal(1)])),
    /**
     * log softmax(logits / τ) of each completion token under `policy_version`, over the FULL
     * vocabulary (not the top-k / top-p renormalised distribution), with τ = the trajectory's
     * `sampling.temperature` (τ = 1 for greedy, temperature 0).
     */
    logprobs: z.array(z.number()),
    /** The parsed tool call, or null when the completion did not parse. */
    action: SqlActionSchema.nullable(),
    /** Why the completion did not parse (null when it did). */
    parse_error: z.string().nullable(),
    /** Time the policy took for this turn, in milliseconds. */
    policy_ms: ms,
  })
  .superRefine((turn, ctx) => {
    if (turn.loss_mask.length !== turn.prompt_ids.length + turn.completion_ids.length) {
      ctx.addIssue({ code: 'custom', path: ['loss_mask'], message: 'loss_mask must cover prompt_ids ++ completion_ids' });
    }
    if (turn.logprobs.length !== turn.completion_ids.length) {
      ctx.addIssue({ code: 'custom', path: ['logprobs'], message: 'one log-prob per completion token' });
    }
    if (turn.loss_mask.slice(0, turn.prompt_ids.length).some((m) => m !== 0)) {
      ctx.addIssue({ code: 'custom', path: ['loss_mask'], message: 'prompt (observation) tokens have loss mask 0' });
    }
  });
export type TrajectoryTurn = z.infer<typeof TrajectoryTurnSchema>;

/** One environment step. */
export const TrajectoryStepSchema = z.strictObject({
  action: SqlActionSchema,
  reward: z.number(),
  /** Null when the environment is remote and the wire carries no breakdown. */
  reward_breakdown: RewardBreakdownSchema.nullable(),
  executed: z.boolean(),
  /** The observation's error text ("" when the action succeeded). */
  error: z.string(),
  done: z.boolean(),
  /** Time spent in the environment for this step, in milliseconds. */
  env_ms: ms,
});
export type TrajectoryStep = z.infer<typeof TrajectoryStepSchema>;

/**
 * answered: the agent called ANSWER. budget_exhausted: the environment's step budget ran out.
 * turn_limit: the run's `max_turns` safety net. context_exhausted: the next turn would not fit in
 * the model's token budget (the conversation so far plus the new prompt fill the context).
 */
export const EpisodeDoneReason = z.enum(['answered', 'budget_exhausted', 'turn_limit', 'context_exhausted']);
export type EpisodeDoneReason = z.infer<typeof EpisodeDoneReason>;

export const TrajectoryOutcomeSchema = z.strictObject({
  correct: z.boolean(),
  /** Sum of the step rewards. */
  total_reward: z.number(),
  steps: count,
  done_reason: EpisodeDoneReason,
  /** The last step's error text, or null when it had none. */
  error: z.string().nullable(),
});
export type TrajectoryOutcome = z.infer<typeof TrajectoryOutcomeSchema>;

export const TrajectoryTimingsSchema = z.strictObject({
  /** From enqueue to the start of the attempt that produced this trajectory. */
  queue_wait_ms: ms,
  /** Reset plus all steps. */
  env_ms: ms,
  /** All policy turns. */
  policy_ms: ms,
  /** Whole episode on the worker. */
  total_ms: ms,
});
export type TrajectoryTimings = z.infer<typeof TrajectoryTimingsSchema>;

/** How completions were sampled: what a trainer needs to recompute the behaviour log-probs. */
export const SamplingSettingsSchema = z.strictObject({
  /** Softmax temperature; 0 = greedy (log-probs are then recorded at τ = 1). */
  temperature: z.number().nonnegative(),
  /** Nucleus mass in (0, 1]; 1 = off. */
  top_p: z.number().gt(0).max(1),
  /** Keep the k most likely tokens; 0 = off. */
  top_k: count,
});
export type SamplingSettings = z.infer<typeof SamplingSettingsSchema>;

/** The temperature the recorded log-probs are at: the sampling temperature, or 1 for greedy. */
export function logprobTemperature(sampling: SamplingSettings): number {
  return sampling.temperature > 0 ? sampling.temperature : 1;
}

export const TRAJECTORY_SCHEMA_VERSION = 2;

const TrajectoryObjectSchema = z.strictObject({
  schema_version: z.union([z.literal(1), z.literal(2)]),
  run_id: z.string().min(1),
  episode_id: z.string().min(1),
  group_id: z.string().min(1),
  index: count,
  question_id: z.string().min(1),
  db_id: z.string().min(1),
  seed: count,
  policy: z.string().min(1),
  /** 1-based attempt that produced this trajectory. */
  attempt: z.number().int().positive(),
  worker_id: z.string(),
  /** Unix epoch milliseconds when the episode started on the worker. */
  started_at_ms: ms,
  /** Sampling settings of the completions (version 2; null for text-only policies). */
  sampling: SamplingSettingsSchema.nullable().optional(),
  turns: z.array(TrajectoryTurnSchema),
  steps: z.array(TrajectoryStepSchema),
  outcome: TrajectoryOutcomeSchema,
  timings: TrajectoryTimingsSchema,
});

export const TrajectorySchema = TrajectoryObjectSchema.superRefine((trajectory, ctx) => {
  if (trajectory.schema_version >= 2 && trajectory.sampling === undefined) {
    ctx.addIssue({ code: 'custom', path: ['sampling'], message: 'schema_version 2 records the sampling settings (null for text-only policies)' });
  }
  if (trajectory.schema_version === 1 && trajectory.sampling !== undefined) {
    ctx.addIssue({ code: 'custom', path: ['sampling'], message: 'schema_version 1 has no sampling field' });
  }
});
export type Trajectory = z.infer<typeof TrajectorySchema>;
