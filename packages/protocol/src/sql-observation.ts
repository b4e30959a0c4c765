import { z } from 'zod';

/**
 * What the agent sees after reset and after each step. Never carries the gold
 * SQL, the gold answer or reward internals (those go in step info).
 */
export const SqlObservationSchema = z
  .strictObject({
    question: z.string().describe('The natural-language question to answer'),
    schema_info: z.string().describe('Table names at first; columns are added as tables are described'),
    result: z.string().describe('Result of the last action, rendered as text'),
    error: z.string().describe('Error message of the last action, or "" if it succeeded'),
    step_count: z.number().int().nonnegative(),
    budget_remaining: z.number().int().nonnegative(),
    action_history: z.array(z.string()).describe('Short summaries of earlier actions, oldest first'),
  })
  .describe('SQLObservation');
export type SqlObservation = z.infer<typeof SqlObservationSchema>;

/** OpenEnv step/reset result: reward and done sit beside the observation, never inside it. */
export const StepResultSchema = z.strictObject({
  observation: SqlObservationSchema,
  reward: z.number().nullable(),
  done: z.boolean(),
});
export type StepResult = z.infer<typeof StepResultSchema>;

/** The reward of one step split into the three layers of the original SQLEnv. */
export const RewardBreakdownSchema = z.strictObject({
  /** L1: executed / new-info / repeat / step-cost terms summed. */
  operational: z.number(),
  /** L2: 0.15 × (Φ_now − Φ_prev) on QUERY steps that returned rows, else 0. */
  progress: z.number(),
  /** Potential Φ after this step (0..1), for analysis. */
  potential: z.number(),
  /** L3: 1.0 for a correct ANSWER, 0.0 otherwise (only non-zero on the final step). */
  terminal: z.number(),
  /** operational + progress before clipping. */
  dense_unclipped: z.number(),
  /** The dense part after clipping to [step_clip_min, step_clip_max]. */
  dense: z.number(),
  /** dense + terminal: the step's reward. */
  total: z.number(),
});
export type RewardBreakdown = z.infer<typeof RewardBreakdownSchema>;

/** Extra per-step data for analysis (trajectories, logs); never sent to the agent. */
export const StepInfoSchema = z.strictObject({
  reward_breakdown: RewardBreakdownSchema,
  /** Whether the action executed without error. */
  executed: z.boolean(),
  /** Set on the final step: was the answer correct. */
  correct: z.boolean().optional(),
  /** Why the episode ended, on the final step. */
  done_reason: z.enum(['answered', 'budget_exhausted']).optional(),
  /** Wall time spent in the SQL executor for this step, in milliseconds. */
  sql_ms: z.number().nonnegative().optional(),
});
export type StepInfo = z.infer<typeof StepInfoSchema>;

/** A step result plus its info (in-process API; the wire carries only StepResult). */
export const StepOutcomeSchema = StepResultSchema.extend({ info: StepInfoSchema });
export type StepOutcome = z.infer<typeof StepOutcomeSchema>;
