import type { EpisodeJob, GroupJob, RolloutRunSpec, BatchStats } from '@sqlenv/protocol';
import { AppError, ErrorCode, silentLogger, type Logger } from '@sqlenv/shared';
import { episodeJobId, groupJobId, groupPosition } from './ids.ts';
import type { RolloutMetrics } from './metrics.ts';
import { episodeSeed, QuestionSchedule, type ScheduledQuestion } from './question-schedule.ts';
import type { FailedGroup, GroupAdmission, RunCounters, Transport } from './transport/transport.ts';
import { Wakeup } from './wakeup.ts';

export interface CoordinatorOptions {
  transport: Transport;
  spec: RolloutRunSpec;
  /** The dataset's questions in the run's split. */
  questions: readonly ScheduledQuestion[];
  /** Fallback poll of the transport's counters; notices wake the loop sooner. Milliseconds. */
  pollMs: number;
  logger?: Logger;
  metrics?: RolloutMetrics;
  signal?: AbortSignal;
  /** Called after every admission with the counters it was decided on (tests check the staleness bound). */
  onAdmit?: (event: AdmissionEvent) => void;
}

export interface AdmissionEvent {
  seq: number;
  /** (max_staleness + policy_version + 1) × groups_per_batch at the time. */
  capacity: number;
  /** accepted + running after this admission. */
  occupied: number;
  policyVersion: number;
}

/** The coordinator's result: printed as one JSON line by `sqlenv coordinator`. */
export interface RunSummary {
  run_id: string;
  transport: Transport['kind'];
  policy: string;
  dataset: string;
  episodes: number;
  group_size: number;
  groups_per_batch: number;
  max_staleness: number;
  episodes_completed: number;
  episodes_failed: number;
  episodes_consumed: number;
  groups_admitted: number;
  groups_trained: number;
  groups_dropped: number;
  groups_failed: number;
  failed_groups: Array<{ group_id: string; reason: string }>;
  duplicate_trajectories: number;
  lost_episodes: number;
  policy_version: number;
  batches: number;
  reward_mean: number | null;
  success_rate: number | null;
  elapsed_s: number;
  episodes_per_s: number;
}

/**
 * Admission control (AReaL-style bounded staleness, docs/async-rl.md):
 *
 *   running  = groups admitted whose outcome is not known yet (episodes queued or playing,
 *              or all played but not yet scored);
 *   accepted = groups scored and kept for training: waiting in the trainer's buffer or
 *              already trained (cumulative; dropped zero-variance and failed groups excluded,
 *              so they free their slot and a replacement is admitted);
 *   accepted + running = admitted − failed − dropped.
 *
 * A new group is admitted only if, counting it, accepted + running ≤ (S + v + 1) × B,
 * with S = max_staleness, v = the trainer's committed version, B = groups_per_batch.
 * With S = 0 at most B untrained groups exist at any time, all admitted at version v:
 * the synchronous schedule.
 */
/**
 * Groups admitted per transport call. Big enough that admission costs a few Redis round trips per
 * dozen groups, small enough that the first episodes start right away.
 */
export const ADMIT_CHUNK_GROUPS = 16;

export function admissionCapacity(spec: RolloutRunSpec, policyVersion: number): number {
  return (spec.max_staleness + policyVersion + 1) * spec.groups_per_batch;
}

export function occupiedGroups(counters: RunCounters): number {
  return counters.admittedGroups - counters.failedGroups - counters.droppedGroups;
}

export function totalGroups(spec: RolloutRunSpec): number {
  if (spec.episodes % spec.group_size !== 0) {
    throw new AppError(ErrorCode.VALIDATION, `episodes (${spec.episodes}) must be a multiple of group_size (${spec.group_size})`);
  }
  return spec.episodes / spec.group_size;
}

/** The group and episode jobs of admission `seq`. Pure: a restarted coordinator rebuilds the same ones. */
export function buildGroup(spec: RolloutRunSpec, schedule: QuestionSchedule, seq: number, admittedVersion: number): { group: GroupJob; episodes: EpisodeJob[] } {
  const question = schedule.questionFor(seq);
  const { step, group: slot } = groupPosition(seq, spec.groups_per_batch);
  const groupId = groupJobId(spec.run_id, seq, spec.groups_per_batch);
  const group: GroupJob = {
    run_id: spec.run_id,
    group_id: groupId,
    seq,
    step,
    group: slot,
    question_id: question.questionId,
    db_id: question.dbId,
    group_size: spec.group_size,
    admitted_version: admittedVersion,
  };
  const episodes = Array.from({ length: spec.group_size }, (_, index): EpisodeJob => ({
    run_id: spec.run_id,
    group_id: groupId,
    group_seq: seq,
    index,
    episode_id: episodeJobId(spec.run_id, seq, spec.groups_per_batch, index),
    question_id: question.questionId,
    db_id: question.dbId,
    seed: episodeSeed(spec.seed, seq, index),
    admitted_version: admittedVersion,
  }));
  return { group, episodes };
}

/**
 * Admit groups until the run's N episodes are admitted, then wait for the
 * trainer to finish the run. Restart-safe: the next seq is the transport's
 * admitted count and a re-admitted group keeps its ids.
 */
export async function runCoordinator(options: CoordinatorOptions): Promise<RunSummary> {
  const { transport, pollMs } = options;
  const logger = (options.logger ?? silentLogger).child({ component: 'coordinator', runId: options.spec.run_id });
  const started = performance.now();
  // First writer wins: a restarted coordinator continues the run as first specified.
  const spec = await transport.registerRun(options.spec);
  const total = totalGroups(spec);
  const schedule = new QuestionSchedule(options.questions, spec.seed);
  const wakeup = new Wakeup();
  const unsubscribe = await transport.subscribe(spec.run_id, () => wakeup.wake());
  const onAbort = (): void => wakeup.wake();
  options.signal?.addEventListener('abort', onAbort);
  logger.info({ episodes: spec.episodes, groups: total, groupSize: spec.group_size, maxStaleness: spec.max_staleness, questions: schedule.size }, 'run started');
  try {
    for (;;) {
      if (options.signal?.aborted) throw new AppError(ErrorCode.ABORTED, 'coordinator stopped before the run finished');
      const counters = await transport.counters(spec.run_id);
      options.metrics?.observeCounters(spec.run_id, counters);
      if (counters.done) break;
      let seq = counters.admittedGroups;
      let occupied = occupiedGroups(counters);
      const capacity = admissionCapacity(spec, counters.policyVersion);
      while (seq < total && occupied + 1 <= capacity) {
        // Up to ADMIT_CHUNK_GROUPS groups per transport call (a few round trips for the lot).
        const chunk: GroupAdmission[] = [];
        while (seq + chunk.length < total && occupied + chunk.length + 1 <= capacity && chunk.length < ADMIT_CHUNK_GROUPS) {
          chunk.push(buildGroup(spec, schedule, seq + chunk.length, counters.policyVersion));
        }
        await transport.admitGroups(spec, chunk);
        for (const { group } of chunk) {
          seq += 1;
          occupied += 1;
          logger.debug({ groupId: group.group_id, seq: group.seq, questionId: group.question_id, capacity, occupied }, 'group admitted');
          options.onAdmit?.({ seq: group.seq, capacity, occupied, policyVersion: counters.policyVersion });
        }
      }
      if (seq >= total && counters.totalGroups === null) {
        await transport.closeAdmission(spec.run_id, total);
        logger.info({ groups: total }, 'all groups admitted');
      }
      if (options.metrics) {
        const depth = await transport.queueDepth(spec.run_id);
        for (const [state, value] of Object.entries(depth)) options.metrics.queueDepth.set({ run: spec.run_id, state }, value);
      }
      await wakeup.wait(pollMs);
    }
  } finally {
    options.signal?.removeEventListener('abort', onAbort);
    await unsubscribe();
  }
  const summary = await summarizeRun(transport, spec, (performance.now() - started) / 1000);
  logger.info(summary, 'run finished');
  return summary;
}

/** The run's numbers from the transport's state (not from this process's memory). */
export async function summarizeRun(transport: Transport, spec: RolloutRunSpec, elapsedS: number): Promise<RunSummary> {
  const [counters, failed, batches] = await Promise.all([transport.counters(spec.run_id), transport.failedGroups(spec.run_id), transport.trainedBatches(spec.run_id)]);
  return buildSummary(transport.kind, spec, counters, failed, batches, elapsedS);
}

/** The fields of a run summary that the run spec decides. */
export function summaryOfSpec(kind: Transport['kind'], spec: RolloutRunSpec): Pick<RunSummary, 'run_id' | 'transport' | 'policy' | 'dataset' | 'episodes' | 'group_size' | 'groups_per_batch' | 'max_staleness'> {
  return {
    run_id: spec.run_id,
    transport: kind,
    policy: spec.policy,
    dataset: spec.dataset,
    episodes: spec.episodes,
    group_size: spec.group_size,
    groups_per_batch: spec.groups_per_batch,
    max_staleness: spec.max_staleness,
  };
}

export function buildSummary(kind: Transport['kind'], spec: RolloutRunSpec, counters: RunCounters, failed: readonly FailedGroup[], batches: readonly BatchStats[], elapsedS: number): RunSummary {
  // Totals over every batch (the transport keeps only the recent batch records of a long run).
  const { trained } = counters;
  const perEpisode = (sum: number): number | null => (trained.episodes === 0 ? null : sum / trained.episodes);
  // Every admitted group ends consumed (G episodes at the trainer) or failed (G episodes discarded);
  // whatever is in neither was lost.
  const lost = Math.max(0, counters.admittedGroups * spec.group_size - counters.consumedEpisodes - counters.failedGroups * spec.group_size);
  return {
    ...summaryOfSpec(kind, spec),
    episodes_completed: counters.completedEpisodes,
    episodes_failed: counters.failedEpisodes,
    episodes_consumed: counters.consumedEpisodes,
    groups_admitted: counters.admittedGroups,
    groups_trained: counters.trainedGroups,
    groups_dropped: counters.droppedGroups,
    groups_failed: counters.failedGroups,
    failed_groups: [...failed].sort((a, b) => a.seq - b.seq).map((f) => ({ group_id: f.groupId, reason: f.reason })),
    duplicate_trajectories: counters.duplicateTrajectories,
    lost_episodes: lost,
    policy_version: counters.policyVersion,
    batches: Math.max(trained.batches, batches.length),
    reward_mean: perEpisode(trained.rewardSum),
    success_rate: perEpisode(trained.correct),
    elapsed_s: round3(elapsedS),
    episodes_per_s: elapsedS > 0 ? round3(counters.completedEpisodes / elapsedS) : 0,
  };
}

function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}
