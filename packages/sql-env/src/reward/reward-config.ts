import { z } from 'zod';
import { AppError, ErrorCode, formatZodIssues } from '@sqlenv/shared';

/**
 * Every constant of the three-layer reward (docs/architecture.md, "The environment",
 * "Reward"); the defaults are the original SQLEnv's. Penalties and costs are
 * MAGNITUDES (≥ 0) that the tracker subtracts, so a config can never turn a
 * cost into a bonus by a sign slip.
 */
export const RewardConfigSchema = z
  .object({
    /** L1: added when a DESCRIBE / SAMPLE / QUERY executed without error. */
    executedBonus: z.number().nonnegative().default(0.02),
    /** L1: added the first time an action key (see actionKey) executes successfully. */
    newInfoBonus: z.number().nonnegative().default(0.01),
    /** L1: subtracted when an action key was already used in this episode (magnitude). */
    repeatPenalty: z.number().nonnegative().default(0.03),
    /** L1: subtracted on every non-ANSWER step (magnitude). */
    stepCost: z.number().nonnegative().default(0.02),
    /** L2: progress = progressScale × (Φ_now − Φ_prev) on successful QUERY steps. */
    progressScale: z.number().nonnegative().default(0.15),
    /** Relative weight of row-count agreement in Φ (weights are normalised by their sum). */
    cardinalityWeight: z.number().nonnegative().default(0.25),
    /** Relative weight of cell-value overlap with the gold rows in Φ. */
    valueOverlapWeight: z.number().nonnegative().default(0.5),
    /** Relative weight of numeric-range agreement in Φ. */
    numericRangeWeight: z.number().nonnegative().default(0.25),
    /** Number of levels Φ is floored to, 0 and 1 included (5 → 0, .25, .5, .75, 1). */
    potentialBins: z.number().int().min(2).max(1000).default(5),
    /** Lower clip of one step's dense (L1 + L2) reward. */
    stepClipMin: z.number().default(-0.1),
    /** Upper clip of one step's dense (L1 + L2) reward. */
    stepClipMax: z.number().default(0.15),
    /** L3: reward of a correct ANSWER. */
    terminalCorrect: z.number().default(1),
    /** L3: reward of a wrong ANSWER or an exhausted budget. */
    terminalWrong: z.number().default(0),
    /**
     * L3 partial credit: a wrong ANSWER earns terminalWrong + answerSimilarityScale × the answer's
     * similarity to the gold answer (character-bigram Dice, in [0, 1]; `answerSimilarity`), so a near
     * miss (a name with a wrong letter, a list with one wrong item) beats a wild guess. In the spirit of
     * Reasoning-SQL's partial rewards (Pourreza et al. 2025). 0, the original's, gives none; keep it
     * below terminalCorrect − terminalWrong so that no wrong answer pays as much as a right one.
     */
    answerSimilarityScale: z.number().nonnegative().default(0),
    /**
     * Subtracted (magnitude) for a PARSE_ERROR step: the agent's output held no valid tool call.
     * Replaces the L1/L2 terms of that step and is not clipped, so it can be set above the clip
     * (SkyRL-SQL gives −1 for a bad format). The default equals the dense clip floor: a format error
     * costs as much as the worst executed action, and more than a failed one (−0.02).
     */
    formatPenalty: z.number().nonnegative().default(0.1),
  })
  .strict()
  .refine((c) => c.answerSimilarityScale < c.terminalCorrect - c.terminalWrong || c.answerSimilarityScale === 0, {
    message: 'answerSimilarityScale must stay below terminalCorrect − terminalWrong (a wrong answer must pay less than a right one)',
    path: ['answerSimilarityScale'],
  })
  .refine((c) => c.stepClipMin <= c.stepClipMax, { message: 'stepClipMin must not exceed stepClipMax', path: ['stepClipMin'] })
  .refine((c) => c.cardinalityWeight + c.valueOverlapWeight + c.numericRangeWeight > 0, {
    message: 'at least one potential weight must be positive',
    path: ['cardinalityWeight'],
  });
export type RewardConfig = z.infer<typeof RewardConfigSchema>;
export type RewardConfigInput = z.input<typeof RewardConfigSchema>;

/** Parses a (partial) reward config, filling defaults; AppError VALIDATION naming the bad fields otherwise. */
export function parseRewardConfig(input: unknown = {}): RewardConfig {
  const parsed = RewardConfigSchema.safeParse(input);
  if (!parsed.success) {
    throw new AppError(ErrorCode.VALIDATION, `invalid reward config: ${formatZodIssues(parsed.error)}`, {
      details: { issues: parsed.error.issues },
    });
  }
  return parsed.data;
}
