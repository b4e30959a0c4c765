import type { PolicySample } from './micro-batches.ts';

/**
 * How far the sampler's recorded log-probs are from the learner's log-probs of the same tokens, over
 * loss tokens, with r = log π_learner − log π_rollout per token.
 */
export interface LogprobMismatch {
  /** Loss tokens measured. */
  tokens: number;
  /** Mean |r|. */
  absLogprobMean: number;
  /**
   * Mean of Schulman's k3 = exp(r) − 1 − r. The tokens were sampled from π_rollout, so this estimates
   * KL(π_rollout ‖ π_learner) (unbiased, each term ≥ 0).
   */
  k3Mean: number;
  /** Mean of the importance weight the loss applies: min(exp(r), cap), 1 where the weight is off (cap 0). */
  importanceWeightMean: number;
}

/**
 * The mismatch of one update. `all`: every loss token against the learner's weights at the start of
 * the update, so a token sampled by an older version carries its staleness too. `fresh`: only the
 * tokens sampled by the very weights the learner holds (lag 0), the sampler-vs-learner numerics alone;
 * null when no token is known to be fresh (the samples carry no `behaviourLag`, or none is 0).
 */
export interface MismatchReport {
  all: LogprobMismatch;
  fresh: LogprobMismatch | null;
}

class MismatchSums {
  tokens = 0;
  abs = 0;
  k3 = 0;
  weight = 0;

  add(r: number, cap: number): void {
    const ratio = Math.exp(r);
    this.tokens += 1;
    this.abs += Math.abs(r);
    this.k3 += ratio - 1 - r;
    this.weight += cap === 0 ? 1 : Math.min(ratio, cap);
  }

  mean(): LogprobMismatch {
    const n = Math.max(this.tokens, 1);
    return { tokens: this.tokens, absLogprobMean: this.abs / n, k3Mean: this.k3 / n, importanceWeightMean: this.tokens === 0 ? 1 : this.weight / n };
  }
}

/**
 * The mismatch between each sample's behaviour log-probs and `learnerLogprobs` (the learner's, same
 * token alignment), in float64, with `cap` the loss's importance cap (0 = off).
 */
export function logprobMismatch(samples: readonly PolicySample[], learnerLogprobs: readonly (readonly number[])[], cap: number): MismatchReport {
  const all = new MismatchSums();
  const fresh = new MismatchSums();
  samples.forEach((sample, i) => {
    const learner = learnerLogprobs[i] ?? [];
    sample.lossMask.forEach((m, t) => {
      if (m !== 1) return;
      const r = (learner[t] as number) - (sample.behaviourLogprobs[t] as number);
      all.add(r, cap);
      if (sample.behaviourLag?.[t] === 0) fresh.add(r, cap);
    });
  });
  return { all: all.mean(), fresh: fresh.tokens === 0 ? null : fresh.mean() };
}
