import type { RolloutRunSpec, ScoredGroup, Trajectory } from '@sqlenv/protocol';
import { AppError, ErrorCode, type Logger } from '@sqlenv/shared';
import { parseEpisodeJobId } from './ids.ts';
import { episodeSlot } from './transport/run-keys.ts';
import type { RunGarbageCollection, WeightsRetention } from './transport/transport.ts';

/**
 * Check that a batch's trajectories are the ones its scored groups were scored from, and return
 * their episode slots for the commit's duplicate count. Each trajectory must carry its group's
 * episode id at its index and exactly the reward the group's advantages were computed from: a
 * trajectory that does not (one sample's tokens under another sample's reward) is refused before any
 * update, and nothing is consumed. The slots come from the trajectories' own episode ids, not from
 * the groups, so a trajectory trained twice shows in `duplicate_trajectories` whatever the group
 * records say.
 */
export function checkBatchTrajectories(spec: RolloutRunSpec, groups: readonly ScoredGroup[], trajectories: readonly (readonly Trajectory[])[]): number[] {
  const problems: string[] = [];
  const slots: number[] = [];
  groups.forEach((group, g) => {
    const batch = trajectories[g] ?? [];
    if (batch.length !== group.episode_ids.length) problems.push(`group ${group.group_id}: ${batch.length} trajectories for ${group.episode_ids.length} episodes`);
    batch.forEach((trajectory, i) => {
      const where = `group ${group.group_id} episode ${i} (${group.trajectory_keys[i] ?? '?'})`;
      if (trajectory.episode_id !== group.episode_ids[i]) problems.push(`${where}: trajectory of ${trajectory.episode_id}, expected ${group.episode_ids[i] ?? '?'}`);
      const reward = group.rewards[i];
      // The group's reward is the trajectory's total as the worker returned it: equal, not close.
      if (reward === undefined || trajectory.outcome.total_reward !== reward) problems.push(`${where}: trajectory reward ${trajectory.outcome.total_reward}, scored reward ${String(reward)}`);
      const parsed = parseEpisodeJobId(spec.run_id, trajectory.episode_id, spec.groups_per_batch);
      if (!parsed || parsed.index >= spec.group_size) problems.push(`${where}: episode id ${trajectory.episode_id} is not one of run ${spec.run_id}'s`);
      else slots.push(episodeSlot(parsed.seq, spec.group_size, parsed.index));
    });
  });
  if (problems.length > 0) {
    throw new AppError(ErrorCode.INTERNAL, `refusing to train on a batch whose trajectories do not match their scored groups: ${problems.slice(0, 5).join('; ')}${problems.length > 5 ? ` (+${problems.length - 5} more)` : ''}`);
  }
  return slots;
}

/** After each commit: delete the consumed groups' trajectories and the weights outside the retention. */
export async function afterCommit(transport: RunGarbageCollection, runId: string, retention: WeightsRetention | undefined, logger: Logger): Promise<void> {
  const trajectories = await transport.drainTrash(runId);
  const weights = retention === undefined ? [] : await transport.pruneWeights(runId, retention);
  if (trajectories > 0 || weights.length > 0) logger.debug({ trajectories, weights }, 'trained data deleted');
}

/**
 * When a trainer (re)starts: finish the deletions a predecessor may have left half done, and delete
 * weight blobs that no commit recorded (a trainer killed between writing its weights and committing).
 * Safe because one trainer serves a run at a time (the trainer lease).
 */
export async function resumeHousekeeping(transport: RunGarbageCollection, runId: string, logger: Logger): Promise<void> {
  const orphans = await transport.sweepUncommittedWeights(runId);
  const trajectories = await transport.drainTrash(runId);
  if (orphans.length > 0 || trajectories > 0) logger.info({ uncommittedWeights: orphans, trajectories }, 'left-overs of an earlier trainer deleted');
}
