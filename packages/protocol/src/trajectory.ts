import { z } from 'zod';
import { SqlActionSchema } from './sql-action.ts';
import { RewardBreakdownSchema } from './sql-observation.ts';

/**
 * A token-exact trajectory (docs/async-rl.md: never re-tokenise
 * text). Stored once, keyed by episode id; jobs carry only the key.
 *
 * Text-only policies (oracle, random, scripted) fill the token fields with
 * empty arrays; the shape is the final one an LLM worker fills.
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
    /** Sampling log-probability of each completion token under `policy_version`. */
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

export const EpisodeDoneReason = z.enum(['answered', 'budget_exhausted', 'turn_limit']);
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

export const TrajectorySchema = z.strictObject({
  schema_version: z.literal(1),
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
  turns: z.array(TrajectoryTurnSchema),
  steps: z.array(TrajectoryStepSchema),
  outcome: TrajectoryOutcomeSchema,
  timings: TrajectoryTimingsSchema,
});
export type Trajectory = z.infer<typeof TrajectorySchema>;
