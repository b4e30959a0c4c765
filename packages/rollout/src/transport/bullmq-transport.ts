import { FlowProducer, Queue, UnrecoverableError, Worker, type Job, type WorkerOptions } from 'bullmq';
import { Redis } from 'ioredis';
import { z } from 'zod';
import { EpisodeJobSchema, EpisodeResultSchema, GroupJobSchema, RolloutNoticeSchema, RolloutRunSpecSchema, RunIdSchema, ScoredGroupSchema, type EpisodeJob, type EpisodeResult, type RolloutNotice, type RolloutRunSpec, type ScoredGroup, type Trajectory, BatchStatsSchema, type BatchStats } from '@sqlenv/protocol';
import { AppError, ErrorCode, formatZodIssues, silentLogger, toAppError, type Logger, maxOf } from '@sqlenv/shared';
import { failureReason, isPermanentFailure } from '../failure.ts';
import { DirectoryBlobStore, type BlobStore } from '../store/blob-store.ts';
import { RedisBlobStore, redisWriteError } from '../store/redis-blob-store.ts';
import { encodeTrajectory, trajectoryKey, TrajectoryStore } from '../store/trajectory-store.ts';
import { defineScripts, type ScriptRedis } from './redis-scripts.ts';
import { episodeSlot, EPISODES, execBatch, GROUPS, groupFlow, redisGlobLiteral, RunKeys } from './run-keys.ts';
import { weightsToPrune } from './weights-retention.ts';
import type {
  CommitResult,
  Consumer,
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

export const BullmqTransportConfigSchema = z.strictObject({
  redisUrl: z.string().min(1).default('redis://127.0.0.1:6379'),
  /** Every key starts with `<keyBase>:{<run id>}` — the run is the Redis Cluster hash tag. */
  keyBase: z.string().regex(/^[A-Za-z0-9_-]+$/).default('sqlenv'),
  /** Trajectories and weights above this size are stored as chunks (or in `spillDir`), in bytes. */
  maxInlineBytes: z.number().int().positive().default(256 * 1024),
  /**
   * Where blobs over the inline bound go: 'redis' = chunks in Redis (every process that reaches Redis
   * reads them, on any host); 'dir' = files in `spillDir`, a directory every process mounts.
   */
  blobStore: z.enum(['redis', 'dir']).default('redis'),
  /** One chunk of a big blob in Redis, in bytes. */
  chunkBytes: z.number().int().positive().default(1024 * 1024),
  /** Directory shared by every process of the run, for blobStore 'dir'. */
  spillDir: z.string().min(1).optional(),
  /** Trained-batch records kept per run (totals are kept for all), so a long run's list stays bounded. */
  keepBatches: z.number().int().positive().default(1_000),
  /** BullMQ job lock; a worker that dies holding it loses its jobs to another after this long. Milliseconds. */
  lockDurationMs: z.number().int().positive().default(30_000),
  /** How often workers look for stalled jobs, in milliseconds. */
  stalledIntervalMs: z.number().int().positive().default(30_000),
  /** Stalls (worker deaths) an episode survives before it fails for good. */
  maxStalledCount: z.number().int().nonnegative().default(3),
  /** Group (parent) jobs scored in parallel by one trainer. */
  groupConcurrency: z.number().int().positive().default(8),
  /** Completed episode jobs kept in Redis for inspection (their results live on in the parent). */
  keepCompletedEpisodes: z.number().int().nonnegative().default(1_000),
  /** Completed group jobs kept in Redis for inspection (a scored group's data lives in the scored buffer). */
  keepCompletedGroups: z.number().int().nonnegative().default(1_000),
  /** Entries kept in each queue's BullMQ event stream (about 150 bytes each); BullMQ's own default. */
  eventsMaxLen: z.number().int().positive().default(10_000),
});
export type BullmqTransportConfig = z.infer<typeof BullmqTransportConfigSchema>;
export type BullmqTransportConfigInput = z.input<typeof BullmqTransportConfigSchema>;

/** Whether a blob key is one of `keys` or a part stored under one (`<key>/<part>`). */
function belongsToAny(blobKey: string, keys: readonly string[]): boolean {
  return keys.some((key) => blobKey === key || blobKey.startsWith(`${key}/`));
}

/** KEYS: lease; ARGV: owner, ttl ms. Take a free lease or renew our own (1); another owner holds it (0). */
interface RunQueues {
  episodes: Queue;
  groups: Queue;
}


/**
 * The distributed transport: a GRPO group is a BullMQ flow (parent job on the
 * `groups` queue, G children on the `episodes` queue, failParentOnFailure), the
 * trainer's buffer and checkpoint are Redis structures updated by Lua scripts,
 * versions travel by pub/sub. Connections use `maxRetriesPerRequest: null`, so
 * every process rides out a Redis outage and carries on when it comes back.
 */
export class BullmqTransport implements Transport {
  readonly kind = 'bullmq';
  readonly blobs: BlobStore;
  readonly trajectories: TrajectoryStore;
  readonly #blobStore: RedisBlobStore;
  readonly #spill: DirectoryBlobStore | undefined;
  readonly #config: BullmqTransportConfig;
  readonly #logger: Logger;
  readonly #redis: ScriptRedis;
  readonly #bullmq: Redis;
  readonly #flows: FlowProducer;
  readonly #queues = new Map<string, RunQueues>();
  readonly #consumers = new Set<Consumer>();
  readonly #listeners = new Map<string, Set<(notice: RolloutNotice) => void>>();
  /** Group size per run, for episode slots (a run's spec never changes once stored). */
  readonly #groupSizes = new Map<string, number>();
  #subscriber: Redis | undefined;
  #closing: Promise<void> | undefined;

  constructor(config: BullmqTransportConfigInput = {}, options: { logger?: Logger } = {}) {
    const parsed = BullmqTransportConfigSchema.safeParse(config);
    if (!parsed.success) throw new AppError(ErrorCode.VALIDATION, `invalid BullMQ transport config: ${formatZodIssues(parsed.error)}`);
    this.#config = parsed.data;
    this.#logger = (options.logger ?? silentLogger).child({ component: 'bullmq-transport' });
    this.#redis = defineScripts(this.#connect('commands'));
    // BullMQ gets its own connection: it defines ~40 Lua commands on the client it is given, and
    // ioredis copies every defined command onto each pipeline/MULTI it creates, which made our
    // per-episode MULTI several times dearer on a shared client.
    this.#bullmq = this.#connect('bullmq');
    this.#flows = new FlowProducer({ connection: this.#bullmq });
    this.#flows.on('error', (error) => this.#logger.warn({ err: error }, 'flow producer error'));
    if (this.#config.blobStore === 'dir' && this.#config.spillDir === undefined) {
      throw new AppError(ErrorCode.VALIDATION, 'invalid BullMQ transport config: blobStore "dir" needs spillDir (SQLENV_SPILL_DIR), a directory every process of the run mounts');
    }
    this.#spill = this.#config.blobStore === 'dir' && this.#config.spillDir !== undefined ? new DirectoryBlobStore(this.#config.spillDir) : undefined;
    this.#blobStore = new RedisBlobStore(this.#redis, {
      redisKey: (key) => this.#blobKey(key),
      maxInlineBytes: this.#config.maxInlineBytes,
      chunkBytes: this.#config.chunkBytes,
      large: this.#spill ?? 'chunks',
    });
    this.blobs = this.#blobStore;
    this.trajectories = new TrajectoryStore(this.blobs);
  }

  #connect(role: string): Redis {
    const redis = new Redis(this.#config.redisUrl, {
      // Wait out outages instead of failing commands (BullMQ requires it for workers).
      maxRetriesPerRequest: null,
      connectionName: `sqlenv-${role}`,
    });
    let down = false;
    redis.on('error', (error: Error) => {
      if (!down) this.#logger.warn({ role, err: error.message }, 'redis connection error; reconnecting');
      down = true;
    });
    redis.on('ready', () => {
      if (down) this.#logger.info({ role }, 'redis connection back');
      down = false;
    });
    return redis;
  }

  /**
   * Resolves when Redis answers a PING on the command connection within `timeoutMs`. Commands never
   * fail during an outage (they wait for the reconnect), so an outage shows as `status` not ready,
   * or as a PING that does not come back in time.
   */
  async ping(timeoutMs: number): Promise<void> {
    if (this.#redis.status !== 'ready') throw new AppError(ErrorCode.TRANSPORT, `redis connection is ${this.#redis.status}`);
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        this.#redis.ping(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new AppError(ErrorCode.TIMEOUT, `redis did not answer PING within ${timeoutMs} ms`)), timeoutMs);
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  #keys(runId: string): RunKeys {
    return new RunKeys(this.#config.keyBase, runId);
  }

  #blobKey(key: string): string {
    const slash = key.indexOf('/');
    if (slash <= 0) throw new AppError(ErrorCode.VALIDATION, `blob key must start with a run id: ${key}`);
    return this.#keys(key.slice(0, slash)).blob(key.slice(slash + 1));
  }

  get #runsKey(): string {
    return `${this.#config.keyBase}:runs`;
  }

  #runQueues(runId: string): RunQueues {
    let queues = this.#queues.get(runId);
    if (!queues) {
      const prefix = this.#keys(runId).prefix;
      // The queue writes its event-stream bound into the queue's meta hash, where BullMQ's scripts read it.
      const streams = { events: { maxLen: this.#config.eventsMaxLen } };
      queues = { episodes: new Queue(EPISODES, { connection: this.#bullmq, prefix, streams }), groups: new Queue(GROUPS, { connection: this.#bullmq, prefix, streams }) };
      for (const queue of [queues.episodes, queues.groups]) queue.on('error', (error) => this.#logger.warn({ err: error, runId }, 'queue error'));
      this.#queues.set(runId, queues);
    }
    return queues;
  }

  async registerRun(spec: RolloutRunSpec): Promise<RolloutRunSpec> {
    const keys = this.#keys(spec.run_id);
    await this.#redis.set(keys.spec, JSON.stringify(spec), 'NX');
    await this.#redis.sadd(this.#runsKey, spec.run_id);
    // Every run ever registered (until deleted or expired), for `sqlenv runs list`.
    await this.#redis.zadd(`${this.#config.keyBase}:all-runs`, 'NX', Date.now(), spec.run_id);
    const stored = await this.getRun(spec.run_id);
    if (!stored) throw new AppError(ErrorCode.INTERNAL, `run ${spec.run_id} vanished right after registration`);
    return stored;
  }

  async getRun(runId: string): Promise<RolloutRunSpec | undefined> {
    const raw = await this.#redis.get(this.#keys(runId).spec);
    if (raw === null) return undefined;
    const parsed = RolloutRunSpecSchema.safeParse(JSON.parse(raw));
    if (!parsed.success) throw new AppError(ErrorCode.VALIDATION, `stored spec of run ${runId}: ${formatZodIssues(parsed.error)}`);
    return parsed.data;
  }

  async activeRuns(): Promise<string[]> {
    const members = await this.#redis.smembers(this.#runsKey);
    // Only registerRun writes this set, with validated ids; a name that is no run id (written by
    // something else) is left out rather than stopping every worker's discovery.
    const ids = members.filter((id) => RunIdSchema.safeParse(id).success);
    if (ids.length < members.length) this.#logger.warn({ ignored: members.filter((id) => !ids.includes(id)) }, 'active-run set holds names that are no run ids; ignored');
    if (ids.length === 0) return [];
    const done = await Promise.all(ids.map((id) => this.#redis.hget(this.#keys(id).state, 'done')));
    // Finished runs leave the set, so every worker's discovery costs O(active runs), not O(runs ever).
    const finished = ids.filter((_, i) => done[i] === '1');
    if (finished.length > 0) await this.#redis.srem(this.#runsKey, ...finished);
    return ids.filter((_, i) => done[i] !== '1').sort();
  }

  async admitGroups(spec: RolloutRunSpec, admissions: readonly GroupAdmission[]): Promise<void> {
    if (admissions.length === 0) return;
    const keys = this.#keys(spec.run_id);
    // A coordinator that died between adding flows and counting them re-admits the same
    // seqs on restart: a parent's existence says its flow is already there.
    const existing = await execBatch(
      admissions.reduce((pipeline, { group }) => pipeline.exists(keys.queueKey(GROUPS, group.group_id)), this.#redis.pipeline()),
      'admission check',
    );
    const missing = admissions.filter((_, i) => existing[i] === 0);
    this.#runQueues(spec.run_id);
    // One MULTI for all the flows: atomic, so a crash leaves each group whole or absent.
    if (missing.length > 0) await this.#flows.addBulk(missing.map(({ group, episodes }) => groupFlow(spec, keys, group, episodes, this.#config)));
    await this.#redis.sqlenvAdvanceAdmitted(keys.state, maxOf(admissions.map((a) => a.group.seq)) + 1);
  }

  async closeAdmission(runId: string, totalGroups: number): Promise<void> {
    await this.#redis.hset(this.#keys(runId).state, 'total_groups', totalGroups);
  }

  async markDone(runId: string): Promise<void> {
    const keys = this.#keys(runId);
    const state = await this.#redis.hmget(keys.state, 'version', 'weights_key');
    await this.#redis.hset(keys.state, 'done', '1');
    const notice: RolloutNotice = { run_id: runId, kind: 'done', version: Number(state[0] ?? 0), weights_key: state[1] ?? null };
    await this.#redis.publish(keys.notices, JSON.stringify(notice));
  }

  async counters(runId: string): Promise<RunCounters> {
    const keys = this.#keys(runId);
    const results = await execBatch(
      this.#redis
        .multi()
        .hgetall(keys.state)
        .zcard(keys.scored)
        .zcard(keys.queueKey(GROUPS, 'failed'))
        .zcard(keys.queueKey(EPISODES, 'failed')),
      'counters',
    );
    const state = (results[0] ?? {}) as Record<string, string>;
    const n = (i: number): number => Number(results[i] ?? 0);
    const num = (field: string): number => Number(state[field] ?? 0);
    return {
      admittedGroups: num('admitted'),
      failedGroups: n(2),
      scoredPending: n(1),
      trainedGroups: num('trained_groups'),
      droppedGroups: num('dropped_groups'),
      policyVersion: num('version'),
      weightsKey: state['weights_key'] ?? null,
      completedEpisodes: num('completed_episodes'),
      failedEpisodes: n(3),
      consumedEpisodes: num('consumed_episodes'),
      duplicateTrajectories: num('duplicate_trajectories'),
      trained: { batches: num('batches'), episodes: num('trained_episodes'), rewardSum: num('trained_reward_sum'), correct: num('trained_correct') },
      totalGroups: state['total_groups'] === undefined ? null : Number(state['total_groups']),
      done: state['done'] === '1',
    };
  }

  async failedGroups(runId: string): Promise<FailedGroup[]> {
    const { groups, episodes } = this.#runQueues(runId);
    const failed = await groups.getFailed(0, -1);
    return Promise.all(
      failed.map(async (job): Promise<FailedGroup> => {
        const data = GroupJobSchema.safeParse(job.data);
        let reason = job.failedReason ?? 'unknown';
        // failParentOnFailure records "child <key> failed" on the parent: fetch the child's own reason.
        const child = /^child (.+) failed$/.exec(reason)?.[1];
        if (child !== undefined) {
          const childId = child.slice(child.lastIndexOf(':') + 1);
          const childJob = await episodes.getJob(childId);
          reason = `episode ${childId} failed: ${childJob?.failedReason ?? 'unknown reason'}`;
        }
        return { groupId: data.success ? data.data.group_id : String(job.id), seq: data.success ? data.data.seq : -1, reason };
      }),
    );
  }

  async queueDepth(runId: string): Promise<QueueDepth> {
    const counts = await this.#runQueues(runId).episodes.getJobCounts('waiting', 'prioritized', 'active', 'delayed');
    return { waiting: (counts['waiting'] ?? 0) + (counts['prioritized'] ?? 0), active: counts['active'] ?? 0, delayed: counts['delayed'] ?? 0 };
  }

  consumeEpisodes(runId: string, processor: EpisodeProcessor, options: EpisodeConsumerOptions): Consumer {
    // The processor's validated payload, so the 'completed' event doesn't parse it a second time.
    const parsedJobs = new WeakMap<Job, EpisodeJob>();
    const worker = new Worker<unknown, EpisodeResult>(
      EPISODES,
      async (job: Job<unknown, EpisodeResult>, token?: string) => {
        const parsed = EpisodeJobSchema.safeParse(job.data);
        // A malformed payload fails the same way on every attempt: never retry it.
        if (!parsed.success) throw new UnrecoverableError(`VALIDATION: malformed episode job: ${formatZodIssues(parsed.error)}`);
        parsedJobs.set(job, parsed.data);
        const attempt = job.attemptsMade + 1;
        const queueWaitMs = Math.max(0, (job.processedOn ?? Date.now()) - job.timestamp);
        try {
          // BullMQ's lock token: unique to this take of the job (a re-run after a stall gets a new one).
          const fence = token ?? `attempt-${attempt}-${job.stalledCounter}`;
          return await processor(parsed.data, { attempt, queueWaitMs, fence });
        } catch (error) {
          if (isPermanentFailure(error)) throw new UnrecoverableError(failureReason(error));
          throw new Error(failureReason(error), { cause: error });
        }
      },
      { ...this.#workerOptions(runId, options.concurrency), ...(options.consumerName === undefined ? {} : { name: options.consumerName }) },
    );
    worker.on('error', (error) => this.#logger.warn({ err: error.message, runId }, 'episode worker error'));
    worker.on('completed', (job, result) => {
      const data = parsedJobs.get(job) ?? EpisodeJobSchema.safeParse(job.data).data;
      if (data) options.onEvent?.({ type: 'completed', job: data, result });
    });
    worker.on('failed', (job, error) => {
      if (!job) return;
      const data = EpisodeJobSchema.safeParse(job.data);
      const final = error.name === 'UnrecoverableError' || job.attemptsMade >= (job.opts.attempts ?? 1);
      options.onEvent?.({ type: 'failed', jobId: String(job.id), job: data.success ? data.data : undefined, reason: error.message, attempt: job.attemptsMade, final });
    });
    return this.#track({ close: () => worker.close() });
  }

  #workerOptions(runId: string, concurrency: number): WorkerOptions {
    return {
      connection: this.#bullmq,
      prefix: this.#keys(runId).prefix,
      concurrency,
      lockDuration: this.#config.lockDurationMs,
      stalledInterval: this.#config.stalledIntervalMs,
      maxStalledCount: this.#config.maxStalledCount,
    };
  }

  async storeTrajectory(trajectory: Trajectory, job: EpisodeJob, fence: string): Promise<string> {
    const runId = trajectory.run_id;
    const keys = this.#keys(runId);
    const key = trajectoryKey(runId, trajectory.episode_id, fence);
    const slot = episodeSlot(job.group_seq, await this.#groupSize(runId), job.index);
    const { redisKey, value } = await this.#blobStore.encode(key, encodeTrajectory(trajectory));
    let stored: number;
    try {
      // One round trip, atomic: stored exactly when the episode counts as completed, and never for a consumed group.
      stored = await this.#redis.sqlenvStoreTrajectory(redisKey, keys.completedEpisodes, keys.consumedGroups, keys.attempts, keys.state, value, slot, job.group_seq, key);
    } catch (error) {
      await this.#blobStore.discard(key, value);
      throw error instanceof Error ? redisWriteError(`trajectory ${key}`, error) : error;
    }
    if (stored === 0) {
      await this.#blobStore.discard(key, value);
      throw new AppError(ErrorCode.ABORTED, `episode ${trajectory.episode_id}: its group was already consumed by the trainer; this late attempt is not stored`);
    }
    return key;
  }

  async #groupSize(runId: string): Promise<number> {
    let size = this.#groupSizes.get(runId);
    if (size === undefined) {
      const spec = await this.getRun(runId);
      if (!spec) throw new AppError(ErrorCode.NOT_FOUND, `run ${runId} is not registered`);
      size = spec.group_size;
      this.#groupSizes.set(runId, size);
    }
    return size;
  }

  consumeGroups(runId: string, scorer: GroupScorer, options: GroupConsumerOptions = {}): Consumer {
    const keys = this.#keys(runId);
    const worker = new Worker<unknown, { scored: boolean }>(
      GROUPS,
      async (job: Job<unknown, { scored: boolean }>) => {
        const parsed = GroupJobSchema.safeParse(job.data);
        if (!parsed.success) throw new UnrecoverableError(`VALIDATION: malformed group job: ${formatZodIssues(parsed.error)}`);
        const values = await job.getChildrenValues<unknown>();
        const results = Object.values(values).map((value) => {
          const result = EpisodeResultSchema.safeParse(value);
          if (!result.success) throw new UnrecoverableError(`VALIDATION: malformed episode result: ${formatZodIssues(result.error)}`);
          return result.data;
        });
        const scored = scorer(parsed.data, results);
        const recorded = await this.#redis.sqlenvRecordScored(keys.consumedGroups, keys.scored, keys.scoredData, scored.group_id, scored.seq, JSON.stringify(scored));
        if (recorded === 1) options.onScored?.(scored);
        return { scored: recorded === 1 };
      },
      this.#workerOptions(runId, this.#config.groupConcurrency),
    );
    worker.on('error', (error) => this.#logger.warn({ err: error.message, runId }, 'group worker error'));
    return this.#track({ close: () => worker.close() });
  }

  async pendingScored(runId: string, limit: number): Promise<ScoredGroup[]> {
    const keys = this.#keys(runId);
    const ids = await this.#redis.zrange(keys.scored, 0, limit - 1);
    if (ids.length === 0) return [];
    const raw = await this.#redis.hmget(keys.scoredData, ...ids);
    return raw.flatMap((json) => (json === null ? [] : [ScoredGroupSchema.parse(JSON.parse(json))]));
  }

  async commit(runId: string, commit: TrainerCommit): Promise<CommitResult> {
    const keys = this.#keys(runId);
    const plan = {
      trained: commit.trained.map((g) => ({ id: g.group_id, seq: g.seq, size: g.episode_ids.length })),
      dropped: commit.dropped.map((g) => ({ id: g.group_id, seq: g.seq, size: g.episode_ids.length })),
      slots: commit.trainedSlots,
    };
    const batch = commit.batch;
    try {
      const duplicateEpisodes = await this.#redis.sqlenvCommit(
        keys.state,
        keys.scored,
        keys.scoredData,
        keys.consumedGroups,
        keys.trainedEpisodes,
        keys.batches,
        keys.attempts,
        keys.trash,
        keys.weights,
        commit.expectedVersion,
        commit.newVersion,
        commit.weightsKey ?? '',
        JSON.stringify(plan),
        batch === null ? '' : JSON.stringify(batch),
        keys.notices,
        runId,
        this.#config.keepBatches,
        batch?.episodes ?? 0,
        batch === null ? 0 : batch.reward_mean * batch.episodes,
        batch === null ? 0 : Math.round(batch.success_rate * batch.episodes),
      );
      return { duplicateEpisodes };
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (message.includes('STALE')) throw new AppError(ErrorCode.ABORTED, `stale trainer: ${message}`, { cause: error });
      if (error instanceof Error && /^OOM\b/.test(message)) throw redisWriteError(`the trainer's commit of version ${commit.newVersion}`, error);
      throw toAppError(error, ErrorCode.TRANSPORT);
    }
  }

  async trainedBatches(runId: string): Promise<BatchStats[]> {
    const raw = await this.#redis.lrange(this.#keys(runId).batches, 0, -1);
    return raw.map((json) => BatchStatsSchema.parse(JSON.parse(json)));
  }

  /**
   * Take the run's trainer lease for `ttlMs` (true), or find it held by another trainer (false).
   * Re-taking a lease this owner holds renews it.
   */
  async acquireTrainerLease(runId: string, owner: string, ttlMs: number): Promise<boolean> {
    const key = this.#keys(runId).trainerLease;
    const result = await this.#redis.sqlenvAcquireLease(key, owner, ttlMs);
    return result === 1;
  }

  /** Give the lease up, if this owner still holds it. */
  async releaseTrainerLease(runId: string, owner: string): Promise<void> {
    await this.#redis.sqlenvReleaseLease(this.#keys(runId).trainerLease, owner);
  }

  async drainTrash(runId: string): Promise<number> {
    const trash = this.#keys(runId).trash;
    let deleted = 0;
    for (;;) {
      // Read a page, delete its blobs, then drop the page: a crash in between deletes them again (harmless).
      const page = await this.#redis.lrange(trash, 0, 255);
      if (page.length === 0) return deleted;
      await this.#blobStore.deleteMany(page);
      await this.#redis.ltrim(trash, page.length, -1);
      deleted += page.length;
    }
  }

  async pruneWeights(runId: string, retention: WeightsRetention): Promise<string[]> {
    const keys = this.#keys(runId);
    const [history, pinned, current] = await Promise.all([this.#redis.zrange(keys.weights, 0, -1, 'WITHSCORES'), this.#redis.hvals(keys.checkpoints), this.#redis.hget(keys.state, 'weights_key')]);
    const committed: Array<{ version: number; key: string }> = [];
    for (let i = 0; i + 1 < history.length; i += 2) committed.push({ key: history[i] as string, version: Number(history[i + 1]) });
    const prune = weightsToPrune(committed, retention, new Set([...pinned, ...(current === null ? [] : [current])]));
    if (prune.length === 0) return [];
    // A version may store parts under its key (`<key>/<part>`: optimizer state next to the adapter).
    const parts = (await Promise.all(prune.map((key) => this.listBlobs(`${key}/`)))).flat();
    await this.#blobStore.deleteMany([...prune, ...parts]);
    await this.#redis.zrem(keys.weights, ...prune);
    return prune;
  }

  async sweepUncommittedWeights(runId: string): Promise<string[]> {
    const keys = this.#keys(runId);
    const stored = await this.listBlobs(`${runId}/weights/`);
    if (stored.length === 0) return [];
    const [recorded, pinned, current] = await Promise.all([this.#redis.zrange(keys.weights, 0, -1), this.#redis.hvals(keys.checkpoints), this.#redis.hget(keys.state, 'weights_key')]);
    const known = [...recorded, ...pinned, ...(current === null ? [] : [current])];
    const orphans = stored.filter((key) => !belongsToAny(key, known));
    if (orphans.length > 0) await this.#blobStore.deleteMany(orphans);
    return orphans;
  }

  /** Blob keys stored under a prefix (`<run>/weights/`): a SCAN of the run's keys, or the spill directory. */
  async listBlobs(prefix: string): Promise<string[]> {
    const slash = prefix.indexOf('/');
    const runPrefix = this.#keys(prefix.slice(0, slash)).blob('');
    const found = new Set<string>();
    let cursor = '0';
    do {
      const [next, batch] = await this.#redis.scan(cursor, 'MATCH', `${redisGlobLiteral(this.#blobKey(prefix))}*`, 'COUNT', 1000);
      cursor = next;
      // Chunk keys ('<blob key>#<id>:<i>') belong to their blob.
      for (const redisKey of batch) if (!redisKey.includes('#')) found.add(`${prefix.slice(0, slash)}/${redisKey.slice(runPrefix.length)}`);
    } while (cursor !== '0');
    return [...found].sort();
  }

  async subscribe(runId: string, listener: (notice: RolloutNotice) => void): Promise<() => Promise<void>> {
    const channel = this.#keys(runId).notices;
    const subscriber = this.#ensureSubscriber();
    let listeners = this.#listeners.get(channel);
    if (!listeners) {
      listeners = new Set();
      this.#listeners.set(channel, listeners);
      await subscriber.subscribe(channel);
    }
    listeners.add(listener);
    return async () => {
      const set = this.#listeners.get(channel);
      set?.delete(listener);
      if (set && set.size === 0) {
        this.#listeners.delete(channel);
        if (!this.#closing) await subscriber.unsubscribe(channel);
      }
    };
  }

  #ensureSubscriber(): Redis {
    if (!this.#subscriber) {
      const subscriber = this.#connect('subscriber');
      subscriber.on('message', (channel: string, message: string) => {
        const parsed = RolloutNoticeSchema.safeParse(JSON.parse(message));
        if (!parsed.success) {
          this.#logger.warn({ channel }, 'malformed notice ignored');
          return;
        }
        for (const listener of this.#listeners.get(channel) ?? []) listener(parsed.data);
      });
      this.#subscriber = subscriber;
    }
    return this.#subscriber;
  }

  #track(consumer: Consumer): Consumer {
    let closing: Promise<void> | undefined;
    const tracked: Consumer = {
      close: () => {
        closing ??= consumer.close().finally(() => this.#consumers.delete(tracked));
        return closing;
      },
    };
    this.#consumers.add(tracked);
    return tracked;
  }

  close(): Promise<void> {
    this.#closing ??= (async () => {
      await Promise.all([...this.#consumers].map((c) => c.close()));
      await Promise.all([...this.#queues.values()].flatMap((q) => [q.episodes.close(), q.groups.close()]));
      await this.#flows.close();
      this.#subscriber?.disconnect();
      await this.#redis.quit().catch(() => this.#redis.disconnect());
      await this.#bullmq.quit().catch(() => this.#bullmq.disconnect());
    })();
    return this.#closing;
  }
}
