import type { EpisodeJob, EpisodeResult, GroupJob, RolloutNotice, RolloutRunSpec, ScoredGroup, Trajectory } from '@sqlenv/protocol';
import type { BatchStats } from '../batch-stats.ts';
import type { BlobStore } from '../store/blob-store.ts';
import type { TrajectoryStore } from '../store/trajectory-store.ts';

/**
 * The one seam between the rollout logic (coordinator, worker, trainer) and
 * where its state lives. Two implementations: BullMQ/Redis (distributed) and
 * in-process (embedded). The same contract tests run against both.
 *
 * Vocabulary used by every implementation:
 * - admitted: groups the coordinator has created (a flow: group + G episodes), cumulative.
 * - failed: groups whose flow failed because an episode ran out of attempts, cumulative.
 * - scored: groups whose G episodes all finished, advantages computed, waiting for the trainer.
 * - consumed = trained + dropped: groups the trainer has taken out of the scored buffer, exactly once.
 */
export interface RunCounters {
  admittedGroups: number;
  failedGroups: number;
  /** Scored and not yet consumed. */
  scoredPending: number;
  trainedGroups: number;
  /** Consumed without training (zero variance). */
  droppedGroups: number;
  /** Trainer's committed policy version (0 before the first update). */
  policyVersion: number;
  weightsKey: string | null;
  /** Distinct episodes whose trajectory was stored. */
  completedEpisodes: number;
  /** Episode jobs that failed for good (out of attempts, or a malformed payload). */
  failedEpisodes: number;
  /** Distinct episodes the trainer consumed (in trained or dropped groups). */
  consumedEpisodes: number;
  /** Episode ids the trainer saw a second time (must stay 0). */
  duplicateTrajectories: number;
  /** Set when the coordinator has admitted its last group. */
  totalGroups: number | null;
  done: boolean;
}

/** One group to admit: the parent job and its G episode jobs. */
export interface GroupAdmission {
  group: GroupJob;
  episodes: readonly EpisodeJob[];
}

export interface FailedGroup {
  groupId: string;
  seq: number;
  reason: string;
}

export interface QueueDepth {
  waiting: number;
  active: number;
  delayed: number;
}

export interface EpisodeAttempt {
  /** 1-based. */
  attempt: number;
  /** From enqueue to the start of this attempt. */
  queueWaitMs: number;
}

/** The worker's job handler. Throwing retries the episode (fresh environment); an AppError VALIDATION never retries. */
export type EpisodeProcessor = (job: EpisodeJob, attempt: EpisodeAttempt) => Promise<EpisodeResult>;

export type EpisodeEvent =
  | { type: 'completed'; job: EpisodeJob; result: EpisodeResult }
  | { type: 'failed'; jobId: string; job: EpisodeJob | undefined; reason: string; attempt: number; final: boolean };

export interface EpisodeConsumerOptions {
  /** Episodes in flight at once in this consumer. */
  concurrency: number;
  /** Recorded on the jobs this consumer takes (BullMQ `processedBy`), for inspection. */
  consumerName?: string;
  onEvent?: (event: EpisodeEvent) => void;
}

/** Turns a finished group (all G results, in index order) into a scored group. */
export type GroupScorer = (group: GroupJob, results: EpisodeResult[]) => ScoredGroup;

export interface GroupConsumerOptions {
  /** Called after a group was recorded as scored (wakes the trainer loop). */
  onScored?: (group: ScoredGroup) => void;
}

export interface Consumer {
  /** Stop taking work; in-flight work finishes (or is handed back). Idempotent. */
  close(): Promise<void>;
}

/** One atomic trainer step: groups leave the scored buffer and the version moves, together or not at all. */
export interface TrainerCommit {
  /** The version the trainer read; the commit is refused when another trainer moved it. */
  expectedVersion: number;
  /** expectedVersion + 1 when `trained` is not empty, else expectedVersion. */
  newVersion: number;
  /** Blob key of the new weights (null when nothing was trained). */
  weightsKey: string | null;
  trained: readonly ScoredGroup[];
  dropped: readonly ScoredGroup[];
  batch: BatchStats | null;
}

export interface CommitResult {
  /** Episode ids that had already been consumed (counted, never trained twice). */
  duplicateEpisodes: number;
}

export interface Transport {
  readonly kind: 'bullmq' | 'in-process';
  /** Weights blobs and (through `trajectories`) trajectories. */
  readonly blobs: BlobStore;
  readonly trajectories: TrajectoryStore;

  /** Store the spec (first writer wins) and list the run as active; returns the stored spec. */
  registerRun(spec: RolloutRunSpec): Promise<RolloutRunSpec>;
  getRun(runId: string): Promise<RolloutRunSpec | undefined>;
  /** Runs registered and not done. */
  activeRuns(): Promise<string[]>;

  /**
   * Create groups (each with its G episode jobs), in seq order, and move the admitted count past the
   * last one. A group already there (same id: a restarted coordinator) is left as it is. Several
   * groups go in one call so admission costs a few Redis round trips per batch, not per group.
   */
  admitGroups(spec: RolloutRunSpec, admissions: readonly GroupAdmission[]): Promise<void>;
  closeAdmission(runId: string, totalGroups: number): Promise<void>;
  markDone(runId: string): Promise<void>;
  counters(runId: string): Promise<RunCounters>;
  failedGroups(runId: string): Promise<FailedGroup[]>;
  queueDepth(runId: string): Promise<QueueDepth>;

  consumeEpisodes(runId: string, processor: EpisodeProcessor, options: EpisodeConsumerOptions): Consumer;
  /**
   * Store an episode's trajectory (under `trajectoryKey(run, episode)`, overwriting an earlier attempt's)
   * and mark the episode completed, in one step (idempotent). Returns the trajectory key.
   */
  storeTrajectory(trajectory: Trajectory): Promise<string>;

  consumeGroups(runId: string, scorer: GroupScorer, options?: GroupConsumerOptions): Consumer;
  /** Scored, unconsumed groups, lowest seq first. */
  pendingScored(runId: string, limit: number): Promise<ScoredGroup[]>;
  commit(runId: string, commit: TrainerCommit): Promise<CommitResult>;
  trainedBatches(runId: string): Promise<BatchStats[]>;

  /** Trainer notices (new version, consumed groups, run done). Returns an unsubscribe function. */
  subscribe(runId: string, listener: (notice: RolloutNotice) => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
}
