import { z } from 'zod';
import { AppError, ErrorCode, formatZodIssues } from '@sqlenv/shared';

/**
 * Every setting of the learner in one schema; defaults follow current practice
 * (TRL's GRPOTrainer and DAPO), with the sources next to each one. docs/training.md
 * explains them.
 */

/** How the per-token policy-gradient terms of a batch are summed into one loss. */
export const LOSS_NORMALISATIONS = ['token', 'sequence', 'dr_grpo'] as const;
export type LossNormalisation = (typeof LOSS_NORMALISATIONS)[number];

export const PolicyLossConfigSchema = z.strictObject({
  /**
   * token (DAPO, TRL's default `loss_type: dapo`): Σ over all loss tokens ÷ their count in the batch;
   * sequence (the original GRPO): mean over episodes of each episode's token mean;
   * dr_grpo (Liu et al. 2025, "Understanding R1-Zero-like training"): Σ ÷ (episodes × maxCompletionTokens).
   */
  normalisation: z.enum(LOSS_NORMALISATIONS).default('token'),
  /** Lower clip range ε_low: the ratio is clipped below at 1 − ε_low (PPO / DAPO: 0.2). */
  epsLow: z.number().nonnegative().max(1).default(0.2),
  /** Upper clip range ε_high: clipped above at 1 + ε_high (DAPO "clip-higher": 0.28). */
  epsHigh: z.number().nonnegative().default(0.28),
  /** β of the k3 KL estimator to the reference policy (adapter off). 0 skips the reference pass (TRL's default since 0.19). */
  klBeta: z.number().nonnegative().default(0),
  /**
   * C of the truncated importance weight w = min(π_prox / π_behaviour, C) on every loss token
   * (`--tis-cap`). π_behaviour is what the sampler recorded, π_prox the learner's log-probs of the
   * same tokens at the start of the update, so w corrects both for staleness (an older version
   * sampled the token) and for a sampler whose numerics differ from the learner's (Yao et al. 2025,
   * "Your efficient RL framework secretly brings you off-policy RL training"; AReaL's decoupled
   * PPO and verl's TIS use 2). With both agreeing w = 1 and C changes nothing. 0 turns the weight
   * off (w = 1 everywhere: neither correction); a finite cap is required (the spec is JSON).
   */
  importanceCap: z.number().nonnegative().default(2),
  /** The constant token count of the Dr. GRPO normaliser (the per-episode completion budget). */
  maxCompletionTokens: z.number().int().positive().default(1024),
});
export type PolicyLossConfig = z.infer<typeof PolicyLossConfigSchema>;

export const LR_SCHEDULES = ['constant', 'cosine'] as const;

export const OptimizerConfigSchema = z.strictObject({
  /** adamw (Loshchilov & Hutter 2019) or sgd: plain gradient descent, no momentum, decay or clipping. */
  kind: z.enum(['adamw', 'sgd']).default('adamw'),
  /** Peak learning rate. 1e-5 is the usual order for LoRA RL on 0.5–2B models (TRL's default is 1e-6 for full fine-tuning). */
  learningRate: z.number().positive().default(1e-5),
  beta1: z.number().min(0).lt(1).default(0.9),
  beta2: z.number().min(0).lt(1).default(0.999),
  epsilon: z.number().positive().default(1e-8),
  /** Decoupled weight decay (transformers' TrainingArguments default: 0). */
  weightDecay: z.number().nonnegative().default(0),
  /** Clip gradients to this global L2 norm (TRL/transformers default 1.0); 0 turns it off. Ignored by sgd. */
  maxGradNorm: z.number().nonnegative().default(1),
  /** Linear warm-up from 0 over this many optimizer steps. */
  warmupSteps: z.number().int().nonnegative().default(0),
  /** After warm-up: constant, or cosine decay to minLrRatio × peak at totalSteps. */
  schedule: z.enum(LR_SCHEDULES).default('constant'),
  /** Optimizer steps the cosine schedule spans (required for cosine). */
  totalSteps: z.number().int().positive().optional(),
  minLrRatio: z.number().min(0).max(1).default(0),
});
export type OptimizerConfig = z.infer<typeof OptimizerConfigSchema>;

export const LearnerConfigSchema = z.strictObject({
  loss: PolicyLossConfigSchema.default(PolicyLossConfigSchema.parse({})),
  optimizer: OptimizerConfigSchema.default(OptimizerConfigSchema.parse({})),
  /**
   * Padded tokens (rows × width) per micro-batch; the gradients of a batch's micro-batches are summed
   * before one optimizer step, so the result does not depend on this (only memory and speed do).
   */
  microBatchTokens: z.number().int().positive().default(4096),
  /** Vocabulary columns per chunk of the log-prob head (memory: tokens × chunk floats per chunk). */
  vocabChunkSize: z.number().int().positive().default(8192),
  /**
   * Passes over each batch (PPO epochs; TRL's `num_iterations`, default 1). With 1 the proximal policy is
   * the current one and its log-probs come from the same forward pass.
   */
  epochs: z.number().int().positive().default(1),
  /**
   * What the backward pass recomputes instead of keeping (training-graph.ts, docs/training-memory.md).
   * 'auto' (default): nothing while one micro-batch's kept activations stay under
   * RECOMPUTE_ABOVE_BYTES (small models: one forward pass less per step), whole layers above.
   */
  recompute: z.enum(['auto', 'none', 'attention', 'layer']).default('auto'),
});
export type LearnerConfig = z.infer<typeof LearnerConfigSchema>;
export type LearnerConfigInput = z.input<typeof LearnerConfigSchema>;

export function parseLearnerConfig(input: unknown = {}): LearnerConfig {
  const result = LearnerConfigSchema.safeParse(input);
  if (!result.success) throw new AppError(ErrorCode.VALIDATION, `invalid learner config: ${formatZodIssues(result.error)}`);
  if (result.data.optimizer.schedule === 'cosine' && result.data.optimizer.totalSteps === undefined) {
    throw new AppError(ErrorCode.VALIDATION, 'invalid learner config: optimizer.schedule cosine needs optimizer.totalSteps');
  }
  return result.data;
}
