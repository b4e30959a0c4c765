import type { Graph, Tensor } from '@sqlenv/onnx-graph';
import type { PolicyLossConfig } from './config.ts';

/** The per-token quantities the policy loss reads, all (B, T) in the model's float type. */
export interface PolicyLossInputs {
  /** log π_θ(token) at the sampling temperature, from the scoring graph (differentiable). */
  logprobs: Tensor;
  /** log π_prox: the policy at the start of this update (no gradient flows into it). */
  proxLogprobs: Tensor;
  /** log π_behaviour: what the worker recorded when it sampled the token. */
  behaviourLogprobs: Tensor;
  /** The episode's advantage, broadcast to each of its tokens. */
  advantages: Tensor;
  /** Normaliser × loss mask: the token's weight in the batch's sum (0 = not a loss token). */
  tokenWeights: Tensor;
  /** log π_ref (adapter off), when klBeta > 0. */
  refLogprobs?: Tensor;
}

export interface PolicyLossOutputs {
  /** Scalar: −Σ w·(IS·min(ρA, clip(ρ)A) − β·k3). */
  loss: Tensor;
  /** Scalar: loss tokens whose ratio the clip cut off (the min picked the clipped term). */
  clippedTokens: Tensor;
  /** Scalar: loss tokens whose importance weight hit the cap. */
  truncatedTokens: Tensor;
  /** Scalar: Σ w·k3, the batch-normalised KL estimate (0 without a reference). */
  kl: Tensor;
}

/**
 * Clipped policy-gradient loss with decoupled importance weights (graph pieces).
 *
 * Per loss token (Schulman et al. 2017, PPO; Shao et al. 2024, GRPO; Yu et al. 2025, DAPO clip-higher;
 * Fu et al. 2025, AReaL's decoupled objective for stale samples):
 *   ρ   = π_θ / π_prox                          (the trust-region ratio)
 *   IS  = min(π_prox / π_behaviour, cap)         (truncated IS: corrects for the sampler, stale or numerically off; cap 0 = off, IS = 1)
 *   ℓ   = IS · min(ρ·A, clip(ρ, 1 − ε_low, 1 + ε_high)·A) − β · k3
 *   k3  = exp(ref − logπ_θ) − (ref − logπ_θ) − 1  (Schulman's unbiased, non-negative KL estimator)
 * and the loss is −Σ w·ℓ, where w carries both the loss mask and the batch normalisation, so the
 * micro-batches of one batch add up to the batch's loss and gradient exactly.
 *
 * Differences are taken only where w > 0: on masked tokens the inputs are zeros, and exp of a
 * large difference there would overflow (0 · ∞ is NaN).
 */
export function policyLoss(g: Graph, inputs: PolicyLossInputs, config: PolicyLossConfig): PolicyLossOutputs {
  const { logprobs, proxLogprobs, behaviourLogprobs, advantages: adv, tokenWeights: w } = inputs;
  const dtype = logprobs.dtype;
  const active = g.greater(w, 0); // (B, T) bool
  const onActive = (x: Tensor): Tensor => g.where(active, x, 0); // (B, T)
  const ratio = g.exp(onActive(g.sub(logprobs, proxLogprobs))); // (B, T)
  const lo = 1 - config.epsLow;
  const hi = 1 + config.epsHigh;
  const clipped = g.where(g.less(ratio, lo), g.scalar(lo, dtype), g.where(g.greater(ratio, hi), g.scalar(hi, dtype), ratio)); // (B, T)
  const plain = g.mul(ratio, adv); // (B, T)
  const cut = g.mul(clipped, adv); // (B, T)
  const takeCut = g.less(cut, plain); // (B, T): min picks the clipped term (ties go to the plain one)
  const surrogate = g.where(takeCut, cut, plain); // (B, T)
  const { perToken: weighted, capped } = truncatedImportance(g, { proxLogprobs, behaviourLogprobs, onActive }, surrogate, config.importanceCap);
  let perToken = weighted;
  let kl = g.scalar(0, dtype);
  if (inputs.refLogprobs !== undefined && config.klBeta > 0) {
    const d = onActive(g.sub(inputs.refLogprobs, logprobs)); // (B, T)
    const k3 = g.sub(g.sub(g.exp(d), d), 1); // (B, T)
    perToken = g.sub(perToken, g.mul(k3, config.klBeta)); // (B, T)
    kl = g.reduceSum(g.mul(w, k3)); // ()
  }
  const count = (flags: Tensor): Tensor => g.reduceSum(g.cast(g.and(active, flags), dtype)); // ()
  return {
    loss: g.neg(g.reduceSum(g.mul(w, perToken))), // ()
    clippedTokens: count(takeCut),
    truncatedTokens: capped === null ? g.scalar(0, dtype) : count(capped),
    kl,
  };
}

/**
 * IS · surrogate with IS = min(exp(log π_prox − log π_behaviour), cap), a constant in the gradient
 * (stop-gradient), and which tokens the cap cut. cap 0: no weight at all (IS = 1, nothing cut).
 */
function truncatedImportance(
  g: Graph,
  inputs: { proxLogprobs: Tensor; behaviourLogprobs: Tensor; onActive: (x: Tensor) => Tensor },
  surrogate: Tensor,
  cap: number,
): { perToken: Tensor; capped: Tensor | null } {
  if (cap === 0) return { perToken: surrogate, capped: null };
  const importance = g.stopGradient(g.exp(inputs.onActive(g.sub(inputs.proxLogprobs, inputs.behaviourLogprobs)))); // (B, T)
  const capped = g.greater(importance, cap); // (B, T)
  return { perToken: g.mul(g.where(capped, g.scalar(cap, surrogate.dtype), importance), surrogate), capped }; // (B, T)
}

/** Supervised fine-tuning: −Σ w·log π_θ (w = loss mask ÷ masked tokens of the batch: a token mean). */
export function sftLoss(g: Graph, logprobs: Tensor, tokenWeights: Tensor): Tensor {
  return g.neg(g.reduceSum(g.mul(tokenWeights, logprobs))); // ()
}
