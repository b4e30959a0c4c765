import { EventEmitter } from 'node:events';
import { EpisodeJobSchema, type EpisodeJob, type EpisodeResult, type GroupJob, type RolloutNotice, type RolloutRunSpec, type ScoredGroup, type Trajectory, type BatchStats } from '@sqlenv/protocol';
import { AppError, ErrorCode, formatZodIssues, appendAll } from '@sqlenv/shared';
import { failureReason, isPermanentFailure, retryDelayMs } from '../failure.ts';
import { MemoryBlobStore } from '../store/blob-store.ts';
import { encodeTrajectory, trajectoryKey, TrajectoryStore } from '../store/trajectory-store.ts';
import { episodeSlot } from './run-keys.ts';
import { weightsToPrune } from './weights-retention.ts';
import type {
  CommitResult,
  Consumer,
  EpisodeAttempt,
  EpisodeConsumerOptions,
  EpisodeProcessor,
  FailedGroup,
  GroupAdmission,
  GroupConsumerOptions,
  GroupScorer,
  QueueDepth,
  RunCounters,
  TrainerCommit,
  Transport,
  WeightsRetention,
} from './transport.ts';

interface QueuedEpisode {
  job: EpisodeJob;
  /** Raw payload as enqueued (validated when a consumer takes it, like the BullMQ worker does). */
  payload: unknown;
  /** 1-based attempt this entry will run as. */
  attempt: number;
  enqueuedAtMs: number;
}

interface GroupState {
  group: GroupJob;
  results: Map<number, EpisodeResult>;
  status: 'running' | 'finished' | 'scored' | 'failed';
  reason?: string;
}

interface RunState {
  spec: RolloutRunSpec;
  groups: Map<string, GroupState>;
  /** Finished groups waiting for a group consumer. */
  unscored: GroupState[];
  queue: QueuedEpisode[];
  active: number;
  delayed: number;
  consumers: Set<EpisodeConsumerImpl>;
  groupConsumers: Set<{ scorer: GroupScorer; options: GroupConsumerOptions }>;
  scored: Map<string, ScoredGroup>;
  consumedGroups: Set<string>;
  consumedEpisodes: number;
  /** Episode slots stored at least once, and slots trained on (the duplicate check). */
  completedEpisodes: Set<number>;
  trainedSlots: Set<number>;
  /** Group seq → blob keys of every stored trajectory attempt; moved to `trash` when the group is consumed. */
  attempts: Map<number, Set<string>>;
  trash: string[];
  /** Committed weights, version → key. */
  weights: Map<number, string>;
  totals: { batches: number; episodes: number; rewardSum: number; correct: number };
  failedEpisodes: number;
  failed: FailedGroup[];
  trainedGroups: number;
  droppedGroups: number;
  duplicateTrajectories: number;
  version: number;
  weightsKey: string | null;
  batches: BatchStats[];
  totalGroups: number | null;
  done: boolean;
  notices: EventEmitter;
}

/**
 * The embedded transport: the same contract as BullMQ, in one process, no
 * Redis. Jobs go through the same validation, retry-with-backoff and
 * fail-the-group rules; there is no stalled-job recovery because nothing can
 * die separately from the process.
 */
export class InProcessTransport implements Transport {
  readonly kind = 'in-process';
  readonly blobs = new MemoryBlobStore();
  readonly trajectories = new TrajectoryStore(this.blobs);
  readonly #runs = new Map<string, RunState>();
  readonly #timers = new Set<NodeJS.Timeout>();
  #closed = false;

  #run(runId: string): RunState {
    const run = this.#runs.get(runId);
    if (!run) throw new AppError(ErrorCode.NOT_FOUND, `unknown run ${runId}`);
    return run;
  }

  registerRun(spec: RolloutRunSpec): Promise<RolloutRunSpec> {
    const existing = this.#runs.get(spec.run_id);
    if (existing) return Promise.resolve(existing.spec);
    this.#runs.set(spec.run_id, {
      spec,
      groups: new Map(),
      unscored: [],
      queue: [],
      active: 0,
      delayed: 0,
      consumers: new Set(),
      groupConsumers: new Set(),
      scored: new Map(),
      consumedGroups: new Set(),
      consumedEpisodes: 0,
      completedEpisodes: new Set(),
      trainedSlots: new Set(),
      attempts: new Map(),
      trash: [],
      weights: new Map(),
      totals: { batches: 0, episodes: 0, rewardSum: 0, correct: 0 },
      failedEpisodes: 0,
      failed: [],
      trainedGroups: 0,
      droppedGroups: 0,
      duplicateTrajectories: 0,
      version: 0,
      weightsKey: null,
      batches: [],
      totalGroups: null,
      done: false,
      notices: new EventEmitter(),
    });
    return Promise.resolve(spec);
  }

  getRun(runId: string): Promise<RolloutRunSpec | undefined> {
    return Promise.resolve(this.#runs.get(runId)?.spec);
  }

  activeRuns(): Promise<string[]> {
    return Promise.resolve([...this.#runs.values()].filter((r) => !r.done).map((r) => r.spec.run_id));
  }

  admitGroups(spec: RolloutRunSpec, admissions: readonly GroupAdmission[]): Promise<void> {
    const run = this.#run(spec.run_id);
    const now = Date.now();
    for (const { group, episodes } of admissions) {
      if (run.groups.has(group.group_id)) continue;
      run.groups.set(group.group_id, { group, results: new Map(), status: 'running' });
      for (const job of episodes) run.queue.push({ job, payload: structuredClone(job), attempt: 1, enqueuedAtMs: now });
    }
    this.#pump(run);
    return Promise.resolve();
  }

  /** Test hook mirroring a raw BullMQ add: a payload that never went through the schema. */
  enqueueRaw(runId: string, payload: unknown): void {
    const run = this.#run(runId);
    run.queue.push({ job: payload as EpisodeJob, payload, attempt: 1, enqueuedAtMs: Date.now() });
    this.#pump(run);
  }

  closeAdmission(runId: string, totalGroups: number): Promise<void> {
    this.#run(runId).totalGroups = totalGroups;
    return Promise.resolve();
  }

  markDone(runId: string): Promise<void> {
    const run = this.#run(runId);
    if (!run.done) {
      run.done = true;
      this.#notify(run, 'done');
    }
    return Promise.resolve();
  }

  counters(runId: string): Promise<RunCounters> {
    const run = this.#run(runId);
    return Promise.resolve({
      admittedGroups: run.groups.size,
      failedGroups: run.failed.length,
      scoredPending: run.scored.size,
      trainedGroups: run.trainedGroups,
      droppedGroups: run.droppedGroups,
      policyVersion: run.version,
      weightsKey: run.weightsKey,
      completedEpisodes: run.completedEpisodes.size,
      failedEpisodes: run.failedEpisodes,
      consumedEpisodes: run.consumedEpisodes,
      duplicateTrajectories: run.duplicateTrajectories,
      trained: { ...run.totals },
      totalGroups: run.totalGroups,
      done: run.done,
    });
  }

  failedGroups(runId: string): Promise<FailedGroup[]> {
    return Promise.resolve([...this.#run(runId).failed]);
  }

  queueDepth(runId: string): Promise<QueueDepth> {
    const run = this.#run(runId);
    return Promise.resolve({ waiting: run.queue.length, active: run.active, delayed: run.delayed });
  }

  consumeEpisodes(runId: string, processor: EpisodeProcessor, options: EpisodeConsumerOptions): Consumer {
    const run = this.#run(runId);
    const consumer = new EpisodeConsumerImpl(processor, options, () => run.consumers.delete(consumer));
    run.consumers.add(consumer);
    this.#pump(run);
    return consumer;
  }

  async storeTrajectory(trajectory: Trajectory, job: EpisodeJob, fence: string): Promise<string> {
    const run = this.#run(trajectory.run_id);
    if (run.consumedGroups.has(job.group_id)) {
      throw new AppError(ErrorCode.ABORTED, `episode ${trajectory.episode_id}: its group was already consumed by the trainer; this late attempt is not stored`);
    }
    const key = trajectoryKey(run.spec.run_id, trajectory.episode_id, fence);
    await this.blobs.put(key, encodeTrajectory(trajectory));
    let attempts = run.attempts.get(job.group_seq);
    if (!attempts) run.attempts.set(job.group_seq, (attempts = new Set()));
    attempts.add(key);
    run.completedEpisodes.add(episodeSlot(job.group_seq, run.spec.group_size, job.index));
    return key;
  }

  consumeGroups(runId: string, scorer: GroupScorer, options: GroupConsumerOptions = {}): Consumer {
    const run = this.#run(runId);
    const entry = { scorer, options };
    run.groupConsumers.add(entry);
    for (const state of run.unscored.splice(0)) this.#score(run, state);
    return {
      close: () => {
        run.groupConsumers.delete(entry);
        return Promise.resolve();
      },
    };
  }

  pendingScored(runId: string, limit: number): Promise<ScoredGroup[]> {
    const pending = [...this.#run(runId).scored.values()].sort((a, b) => a.seq - b.seq);
    return Promise.resolve(pending.slice(0, limit));
  }

  commit(runId: string, commit: TrainerCommit): Promise<CommitResult> {
    const run = this.#run(runId);
    if (run.version !== commit.expectedVersion) {
      return Promise.reject(new AppError(ErrorCode.ABORTED, `stale trainer: version is ${run.version}, commit expected ${commit.expectedVersion}`));
    }
    // Everything below runs without an await: atomic, like the Redis script.
    const consume = (group: ScoredGroup): boolean => {
      run.scored.delete(group.group_id);
      if (run.consumedGroups.has(group.group_id)) return false;
      run.consumedGroups.add(group.group_id);
      run.consumedEpisodes += group.episode_ids.length;
      appendAll(run.trash, run.attempts.get(group.seq) ?? []);
      run.attempts.delete(group.seq);
      return true;
    };
    for (const group of commit.trained) if (consume(group)) run.trainedGroups += 1;
    for (const group of commit.dropped) if (consume(group)) run.droppedGroups += 1;
    // Counted from what was trained on, independently of the group bookkeeping above.
    let duplicateEpisodes = 0;
    for (const slot of commit.trainedSlots) {
      if (run.trainedSlots.has(slot)) duplicateEpisodes += 1;
      else run.trainedSlots.add(slot);
    }
    run.duplicateTrajectories += duplicateEpisodes;
    if (commit.batch) {
      run.batches.push(commit.batch);
      run.totals.batches += 1;
      run.totals.episodes += commit.batch.episodes;
      run.totals.rewardSum += commit.batch.reward_mean * commit.batch.episodes;
      run.totals.correct += Math.round(commit.batch.success_rate * commit.batch.episodes);
    }
    run.version = commit.newVersion;
    if (commit.weightsKey !== null) {
      run.weightsKey = commit.weightsKey;
      run.weights.set(commit.newVersion, commit.weightsKey);
    }
    this.#notify(run, commit.trained.length > 0 ? 'version' : 'consumed');
    return Promise.resolve({ duplicateEpisodes });
  }

  trainedBatches(runId: string): Promise<BatchStats[]> {
    return Promise.resolve([...this.#run(runId).batches]);
  }

  async drainTrash(runId: string): Promise<number> {
    const run = this.#run(runId);
    const keys = run.trash.splice(0);
    await this.blobs.deleteMany(keys);
    return keys.length;
  }

  async pruneWeights(runId: string, retention: WeightsRetention): Promise<string[]> {
    const run = this.#run(runId);
    const committed = [...run.weights].map(([version, key]) => ({ version, key }));
    const prune = weightsToPrune(committed, retention, new Set(run.weightsKey === null ? [] : [run.weightsKey]));
    // A version may store parts under its key (`<key>/<part>`), deleted with it.
    await this.blobs.deleteMany([...prune, ...prune.flatMap((key) => this.blobs.keys(`${key}/`))]);
    for (const [version, key] of run.weights) if (prune.includes(key)) run.weights.delete(version);
    return prune;
  }

  async sweepUncommittedWeights(runId: string): Promise<string[]> {
    const run = this.#run(runId);
    const known = [...run.weights.values(), ...(run.weightsKey === null ? [] : [run.weightsKey])];
    const orphans = this.blobs.keys(`${runId}/weights/`).filter((key) => !known.some((k) => key === k || key.startsWith(`${k}/`)));
    await this.blobs.deleteMany(orphans);
    return orphans;
  }

  subscribe(runId: string, listener: (notice: RolloutNotice) => void): Promise<() => Promise<void>> {
    const run = this.#run(runId);
    run.notices.on('notice', listener);
    return Promise.resolve(() => {
      run.notices.off('notice', listener);
      return Promise.resolve();
    });
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
    for (const run of this.#runs.values()) await Promise.all([...run.consumers].map((c) => c.close()));
  }

  #notify(run: RunState, kind: RolloutNotice['kind']): void {
    run.notices.emit('notice', { run_id: run.spec.run_id, kind, version: run.version, weights_key: run.weightsKey } satisfies RolloutNotice);
  }

  /** Hand queued episodes to consumers with free slots (round-robin by list order). */
  #pump(run: RunState): void {
    if (this.#closed) return;
    for (const consumer of run.consumers) {
      while (run.queue.length > 0 && consumer.hasCapacity()) {
        const entry = run.queue.shift() as QueuedEpisode;
        run.active += 1;
        void this.#runEpisode(run, consumer, entry).finally(() => {
          run.active -= 1;
          this.#pump(run);
        });
      }
    }
  }

  async #runEpisode(run: RunState, consumer: EpisodeConsumerImpl, entry: QueuedEpisode): Promise<void> {
    const parsed = EpisodeJobSchema.safeParse(entry.payload);
    const jobId = parsed.success ? parsed.data.episode_id : describePayload(entry.payload);
    if (!parsed.success) {
      run.failedEpisodes += 1;
      consumer.emit({ type: 'failed', jobId, job: undefined, reason: `VALIDATION: malformed episode job: ${formatZodIssues(parsed.error)}`, attempt: entry.attempt, final: true });
      return;
    }
    const job = parsed.data;
    try {
      const result = await consumer.run(job, { attempt: entry.attempt, queueWaitMs: Date.now() - entry.enqueuedAtMs, fence: `attempt-${entry.attempt}` });
      consumer.emit({ type: 'completed', job, result });
      this.#childCompleted(run, job, result);
    } catch (error) {
      const final = isPermanentFailure(error) || entry.attempt >= run.spec.attempts;
      const reason = failureReason(error);
      consumer.emit({ type: 'failed', jobId, job, reason, attempt: entry.attempt, final });
      if (final) {
        run.failedEpisodes += 1;
        this.#childFailed(run, job, reason);
        return;
      }
      run.delayed += 1;
      const timer = setTimeout(() => {
        this.#timers.delete(timer);
        run.delayed -= 1;
        run.queue.push({ ...entry, attempt: entry.attempt + 1 });
        this.#pump(run);
      }, retryDelayMs(run.spec.backoff_ms, entry.attempt));
      this.#timers.add(timer);
    }
  }

  #childCompleted(run: RunState, job: EpisodeJob, result: EpisodeResult): void {
    const state = run.groups.get(job.group_id);
    if (!state || state.status !== 'running') return;
    state.results.set(job.index, result);
    if (state.results.size < state.group.group_size) return;
    state.status = 'finished';
    if (run.groupConsumers.size === 0) run.unscored.push(state);
    else this.#score(run, state);
  }

  #childFailed(run: RunState, job: EpisodeJob, reason: string): void {
    const state = run.groups.get(job.group_id);
    // Like BullMQ's failParentOnFailure: one child out of attempts fails the whole group.
    if (!state || state.status !== 'running') return;
    state.status = 'failed';
    state.reason = reason;
    run.failed.push({ groupId: state.group.group_id, seq: state.group.seq, reason: `episode ${job.episode_id} failed: ${reason}` });
  }

  #score(run: RunState, state: GroupState): void {
    const [first] = run.groupConsumers;
    if (!first) {
      run.unscored.push(state);
      return;
    }
    const results = [...state.results.entries()].sort((a, b) => a[0] - b[0]).map(([, r]) => r);
    const scored = first.scorer(state.group, results);
    state.status = 'scored';
    if (!run.consumedGroups.has(scored.group_id)) run.scored.set(scored.group_id, scored);
    first.options.onScored?.(scored);
  }
}

function describePayload(payload: unknown): string {
  if (payload !== null && typeof payload === 'object' && 'episode_id' in payload && typeof payload.episode_id === 'string') return payload.episode_id;
  return '(malformed)';
}

class EpisodeConsumerImpl implements Consumer {
  readonly #processor: EpisodeProcessor;
  readonly #options: EpisodeConsumerOptions;
  readonly #onClose: () => void;
  readonly #inFlight = new Set<Promise<unknown>>();
  #closed = false;

  constructor(processor: EpisodeProcessor, options: EpisodeConsumerOptions, onClose: () => void) {
    this.#processor = processor;
    this.#options = options;
    this.#onClose = onClose;
  }

  hasCapacity(): boolean {
    return !this.#closed && this.#inFlight.size < this.#options.concurrency;
  }

  run(job: EpisodeJob, attempt: EpisodeAttempt): Promise<EpisodeResult> {
    const promise = this.#processor(job, attempt);
    const tracked = promise.then(
      () => undefined,
      () => undefined,
    );
    this.#inFlight.add(tracked);
    void tracked.then(() => this.#inFlight.delete(tracked));
    return promise;
  }

  emit(event: Parameters<NonNullable<EpisodeConsumerOptions['onEvent']>>[0]): void {
    this.#options.onEvent?.(event);
  }

  async close(): Promise<void> {
    if (!this.#closed) {
      this.#closed = true;
      this.#onClose();
    }
    await Promise.all([...this.#inFlight]);
  }
}
