import type { EpisodeResult, GroupJob, RolloutRunSpec, ScoredGroup, Trajectory, BatchStats } from '@sqlenv/protocol';
import { AppError, ErrorCode, maxOf, minOf } from '@sqlenv/shared';
import { groupAdvantages } from './advantages.ts';

/** A finished group (all G results) → its advantages and summary, ready for the trainer. */
export function scoreGroup(spec: RolloutRunSpec, group: GroupJob, results: readonly EpisodeResult[]): ScoredGroup {
  const byIndex = [...results].sort((a, b) => a.index - b.index);
  if (byIndex.length !== group.group_size || byIndex.some((r, i) => r.index !== i)) {
    throw new AppError(ErrorCode.INTERNAL, `group ${group.group_id}: expected episodes 0..${group.group_size - 1}, got [${byIndex.map((r) => r.index).join(', ')}]`);
  }
  const rewards = byIndex.map((r) => r.reward);
  const { mean, std, zeroVariance, advantages } = groupAdvantages(rewards, spec.advantage, spec.negative_advantage_weight);
  return {
    run_id: group.run_id,
    group_id: group.group_id,
    seq: group.seq,
    question_id: group.question_id,
    episode_ids: byIndex.map((r) => r.episode_id),
    trajectory_keys: byIndex.map((r) => r.trajectory_key),
    rewards,
    advantages,
    correct: byIndex.map((r) => r.correct),
    reward_mean: mean,
    reward_std: std,
    zero_variance: zeroVariance,
    min_policy_version: minOf(byIndex.map((r) => r.min_policy_version)),
    max_policy_version: maxOf(byIndex.map((r) => r.max_policy_version)),
  };
}

/** Statistics of one trained batch (groups oldest first, trajectories in index order). */
export function batchStats(version: number, groups: readonly ScoredGroup[], trajectories: readonly (readonly Trajectory[])[]): BatchStats {
  const rewards: number[] = [];
  let correct = 0;
  let steps = 0;
  let advantageAbs = 0;
  let lossTokens = 0;
  let minVersion = Number.POSITIVE_INFINITY;
  let maxVersion = 0;
  groups.forEach((group, g) => {
    group.rewards.forEach((reward, i) => {
      rewards.push(reward);
      if (group.correct[i]) correct += 1;
      advantageAbs += Math.abs(group.advantages[i] ?? 0);
    });
    for (const trajectory of trajectories[g] ?? []) {
      steps += trajectory.outcome.steps;
      for (const turn of trajectory.turns) {
        minVersion = Math.min(minVersion, turn.policy_version);
        maxVersion = Math.max(maxVersion, turn.policy_version);
        for (const m of turn.loss_mask) lossTokens += m;
      }
    }
  });
  const n = rewards.length;
  const mean = n === 0 ? 0 : rewards.reduce((s, r) => s + r, 0) / n;
  const variance = n === 0 ? 0 : rewards.reduce((s, r) => s + (r - mean) ** 2, 0) / n;
  const minSampled = Number.isFinite(minVersion) ? minVersion : version - 1;
  return {
    version,
    group_ids: groups.map((g) => g.group_id),
    episodes: n,
    reward_mean: mean,
    reward_std: Math.sqrt(variance),
    success_rate: n === 0 ? 0 : correct / n,
    mean_steps: n === 0 ? 0 : steps / n,
    advantage_abs_mean: n === 0 ? 0 : advantageAbs / n,
    min_sampled_version: minSampled,
    max_sampled_version: Number.isFinite(minVersion) ? maxVersion : version - 1,
    max_staleness: Math.max(0, version - 1 - minSampled),
    loss_tokens: lossTokens,
  };
}
