import { AdvantageMode } from '@sqlenv/protocol';

/** TRL's epsilon in the GRPO denominator. */
export const GRPO_STD_EPS = 1e-4;

export interface GroupAdvantages {
  mean: number;
  /** Population standard deviation of the group's rewards. */
  std: number;
  /** Every reward equal (to 1e-12): the group carries no learning signal. */
  zeroVariance: boolean;
  advantages: number[];
}

/**
 * Group-relative advantages, one per episode.
 * - GRPO (Shao et al. 2024, DeepSeekMath §4.1.2): A_i = (r_i − mean(r)) / (std(r) + eps).
 * - Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-Like Training"): A_i = r_i − mean(r),
 *   dropping the std division that over-weights near-uniform groups.
 * `negativeWeight` (λ, the run's negative_advantage_weight) then scales the negative ones: 1 leaves
 * them, 0 keeps only the reinforcement of better-than-average episodes.
 */
export function groupAdvantages(rewards: readonly number[], mode: AdvantageMode, negativeWeight = 1): GroupAdvantages {
  const n = rewards.length;
  if (n === 0) return { mean: 0, std: 0, zeroVariance: true, advantages: [] };
  const mean = rewards.reduce((s, r) => s + r, 0) / n;
  const variance = rewards.reduce((s, r) => s + (r - mean) ** 2, 0) / n;
  const std = Math.sqrt(variance);
  const zeroVariance = rewards.every((r) => Math.abs(r - (rewards[0] as number)) <= 1e-12);
  const advantages = rewards.map((r) => {
    const a = mode === AdvantageMode.GRPO ? (r - mean) / (std + GRPO_STD_EPS) : r - mean;
    if (a >= 0) return a;
    return negativeWeight === 0 ? 0 : a * negativeWeight;
  });
  return { mean, std, zeroVariance, advantages };
}
