import type { EpisodeResult, RolloutRunSpec, ScoredGroup, Trajectory, BatchStats } from '@sqlenv/protocol';
import { buildGroup, totalGroups } from './coordinator.ts';
import { failureReason, isPermanentFailure } from './failure.ts';
import { playEpisode } from './play-episode.ts';
import { QuestionSchedule, type ScheduledQuestion } from './question-schedule.ts';
import type { RunResources } from './rollout-worker.ts';
import { batchStats, scoreGroup } from './scoring.ts';
import { StatsPolicyUpdater, type PolicyUpdater } from './trainer.ts';

export interface SynchronousRunOptions {
  spec: RolloutRunSpec;
  questions: readonly ScheduledQuestion[];
  resources: RunResources;
  updater?: PolicyUpdater;
}

export interface SynchronousRunResult {
  batches: BatchStats[];
  failedGroups: Array<{ group_id: string; reason: string }>;
  droppedGroups: number;
  episodesPlayed: number;
}

/**
 * The plain synchronous loop — generate a batch, train, repeat — with no queue,
 * no concurrency and no transport. It is the reference the distributed run
 * must reproduce at max_staleness = 0 (same seeds → same batches;
 * tests/rollout-contract.test.ts). `sqlenv train` runs training-run.ts, not this.
 */
export async function runSynchronous(options: SynchronousRunOptions): Promise<SynchronousRunResult> {
  const { spec, resources } = options;
  const updater = options.updater ?? new StatsPolicyUpdater();
  await updater.restore(null, 0);
  const schedule = new QuestionSchedule(options.questions, spec.seed);
  const total = totalGroups(spec);
  let version = 0;
  let buffer: Array<{ scored: ScoredGroup; trajectories: Trajectory[] }> = [];
  const result: SynchronousRunResult = { batches: [], failedGroups: [], droppedGroups: 0, episodesPlayed: 0 };

  const train = async (): Promise<void> => {
    const groups = buffer.map((b) => b.scored);
    const trajectories = buffer.map((b) => b.trajectories);
    const stats = batchStats(version + 1, groups, trajectories);
    await updater.update({ version: version + 1, groups, trajectories, stats });
    version += 1;
    result.batches.push(stats);
    buffer = [];
  };

  for (let seq = 0; seq < total; seq++) {
    const { group, episodes } = buildGroup(spec, schedule, seq, version);
    const trajectories: Trajectory[] = [];
    let failure: string | undefined;
    for (const job of episodes) {
      for (let attempt = 1; attempt <= spec.attempts; attempt++) {
        try {
          trajectories.push(
            await playEpisode(job, { attempt, queueWaitMs: 0 }, { environments: resources.environments, policy: resources.policy, currentVersion: () => version, workerId: 'sync', maxTurns: spec.max_turns, sampling: resources.sampling ?? null }),
          );
          result.episodesPlayed += 1;
          break;
        } catch (error) {
          if (isPermanentFailure(error) || attempt === spec.attempts) {
            failure = `episode ${job.episode_id} failed: ${failureReason(error)}`;
            break;
          }
        }
      }
      if (failure !== undefined) break;
    }
    if (failure !== undefined) {
      result.failedGroups.push({ group_id: group.group_id, reason: failure });
      continue;
    }
    const results = trajectories.map((t): EpisodeResult => ({
      episode_id: t.episode_id,
      index: t.index,
      trajectory_key: t.episode_id,
      reward: t.outcome.total_reward,
      correct: t.outcome.correct,
      steps: t.outcome.steps,
      attempt: t.attempt,
      min_policy_version: version,
      max_policy_version: version,
    }));
    const scored = scoreGroup(spec, group, results);
    if (spec.drop_zero_variance && scored.zero_variance) {
      result.droppedGroups += 1;
      continue;
    }
    buffer.push({ scored, trajectories });
    if (buffer.length === spec.groups_per_batch) await train();
  }
  if (buffer.length > 0) await train();
  return result;
}
