import type { EpisodeJob, EpisodeResult, GroupJob, RolloutNotice, RolloutRunSpec, ScoredGroup, Trajectory, BatchStats } from '@sqlenv/protocol';
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
  /**
   * Episodes trained on a second time (must stay 0), counted from the trajectories each batch
   * actually trained on (their own episode ids), not from the group bookkeeping.
   */
  duplicateTrajectories: number;
  /** Totals over every trained batch (the run summary; the per-batch list keeps only the recent ones). */
  trained: { batches: number; episodes: number; rewardSum: number; correct: number };
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
  /**
   * Unique to this take of the job (BullMQ's lock token). The trajectory is stored under a key that
   * includes it, so a worker that lost its lock (paused, then resumed) never overwrites the
   * trajectory of the attempt whose completion was accepted.
   */
  fence: string;
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
  /** Episode slots (seq × G + index) of the trajectories the update trained on, read from the trajectories themselves. */
  trainedSlots: readonly number[];
  batch: BatchStats | null;
}

/** Which committed weights to keep; older ones are deleted. */
export interface WeightsRetention {
  /** The newest K committed versions (K ≥ 1; workers only ever load the newest). */
  keepLast: number;
  /** Also keep every version divisible by this (0 = none). */
  checkpointEvery: number;
}

export interface CommitResult {
  /** Episode ids that had already been consumed (counted, never trained twice). */
  duplicateEpisodes: number;
}

/** The runs: specs, counters, notices. Every loop reads it; the coordinator and the trainer write it. */
export interface RunRegistry {
  /** Store the spec (first writer wins) and list the run as active; returns the stored spec. */
  registerRun(spec: RolloutRunSpec): Promise<RolloutRunSpec>;
  getRun(runId: string): Promise<RolloutRunSpec | undefined>;
  /** Runs registered and not done. */
  activeRuns(): Promise<string[]>;
  counters(runId: string): Promise<RunCounters>;
  markDone(runId: string): Promise<void>;
  /** Trainer notices (new version, consumed groups, run done). Returns an unsubscribe function. */
  subscribe(runId: string, listener: (notice: RolloutNotice) => void): Promise<() => Promise<void>>;
}

/** The coordinator's side of the queue: admitting groups and watching them. */
export interface GroupAdmissions {
  /**
   * Create groups (each with its G episode jobs), in seq order, and move the admitted count past the
   * last one. A group already there (same id: a restarted coordinator) is left as it is. Several
   * groups go in one call so admission costs a few Redis round trips per batch, not per group.
   */
  admitGroups(spec: RolloutRunSpec, admissions: readonly GroupAdmission[]): Promise<void>;
  closeAdmission(runId: string, totalGroups: number): Promise<void>;
  failedGroups(runId: string): Promise<FailedGroup[]>;
  queueDepth(runId: string): Promise<QueueDepth>;
}

/** The workers' side of the queue: taking episode jobs and storing their trajectories. */
export interface EpisodeQueue {
  consumeEpisodes(runId: string, processor: EpisodeProcessor, options: EpisodeConsumerOptions): Consumer;
  /**
   * Store one attempt's trajectory under `trajectoryKey(run, episode, fence)` and mark the episode
   * completed, in one step. Returns the trajectory key, which the job returns as its result: only
   * the attempt whose completion BullMQ accepts is ever read. Throws AppError ABORTED when the
   * group was consumed already (a late attempt), CAPACITY when Redis is full.
   */
  storeTrajectory(trajectory: Trajectory, job: EpisodeJob, fence: string): Promise<string>;
}

/** The trainer's side: scoring finished groups, reading the scored buffer, committing a version. */
export interface ScoredBuffer {
  consumeGroups(runId: string, scorer: GroupScorer, options?: GroupConsumerOptions): Consumer;
  /** Scored, unconsumed groups, lowest seq first. */
  pendingScored(runId: string, limit: number): Promise<ScoredGroup[]>;
  commit(runId: string, commit: TrainerCommit): Promise<CommitResult>;
  /** The most recent trained batches (the transport keeps a bounded number). */
  trainedBatches(runId: string): Promise<BatchStats[]>;
}

/** What the trainer deletes after a commit (trainer-housekeeping.ts). */
export interface RunGarbageCollection {
  /** Delete the trajectories of consumed groups (every stored attempt); returns how many. */
  drainTrash(runId: string): Promise<number>;
  /**
   * Delete committed weights outside the retention (never the current or a named checkpoint), with
   * any parts stored under their keys (`<key>/<part>`); returns the keys. Weight blobs must live
   * under `<run>/weights/`.
   */
  pruneWeights(runId: string, retention: WeightsRetention): Promise<string[]>;
  /** Delete weight blobs no commit recorded (a trainer died between writing and committing); returns their keys. */
  sweepUncommittedWeights(runId: string): Promise<string[]>;
}

/**
 * Everything the coordinator, the workers and the trainer share, written once against this:
 * BullmqTransport (Redis, many processes) and InProcessTransport (one process) implement it whole,
 * and tests/rollout-contract.test.ts runs the same contract against both.
 */
export interface Transport extends RunRegistry, GroupAdmissions, EpisodeQueue, ScoredBuffer, RunGarbageCollection {
  readonly kind: 'bullmq' | 'in-process';
  /** Weights blobs and (through `trajectories`) trajectories. */
  readonly blobs: BlobStore;
  readonly trajectories: TrajectoryStore;
  close(): Promise<void>;
}
