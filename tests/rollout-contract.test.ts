import { randomBytes } from 'node:crypto';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { RolloutRunSpecSchema, type RolloutRunSpecInput } from '@sqlenv/protocol';
import type {
  MemoryBlobStore} from '@sqlenv/rollout';
import {
  BullmqTransport,
  buildGroup,
  InProcessTransport,
  QuestionSchedule,
  RolloutWorker,
  runCoordinator,
  runSynchronous,
  runTrainer,
  scoreGroup,
  StatsPolicyUpdater,
  type AdmissionEvent,
  type EpisodeEvent,
  type GroupAdmission,
  type RunSummary,
  type Transport,
} from '@sqlenv/rollout';
import { TOY_QUESTIONS, ToyPolicy, toyEnvironments, deleteKeysUnder } from '@sqlenv/rollout/testing';

/**
 * The transport contract: the same coordinator / worker / trainer logic, run
 * once over the in-process transport and once over BullMQ + a real Redis,
 * must give the same guarantees.
 */
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const keyBases: string[] = [];

interface TransportFactory {
  name: string;
  /** A transport for one role; the in-process one is shared, BullMQ gets one per role (like separate processes). */
  open(): () => Transport;
  /** Put a job with a payload that is not an EpisodeJob on the run's episode queue. */
  injectMalformed(transport: Transport, runId: string, payload: unknown): Promise<void>;
}

const inProcess: TransportFactory = {
  name: 'in-process',
  open: () => {
    const shared = new InProcessTransport();
    return () => shared;
  },
  injectMalformed: (transport, runId, payload) => {
    (transport as InProcessTransport).enqueueRaw(runId, payload);
    return Promise.resolve();
  },
};

const bullmq: TransportFactory = {
  name: 'bullmq',
  open: () => {
    const keyBase = `test-${randomBytes(4).toString('hex')}`;
    keyBases.push(keyBase);
    return () => new BullmqTransport({ redisUrl: REDIS_URL, keyBase, lockDurationMs: 2_000, stalledIntervalMs: 1_000 });
  },
  injectMalformed: async (_transport, runId, payload) => {
    const keyBase = keyBases.at(-1) as string;
    const queue = new Queue('episodes', { connection: { url: REDIS_URL }, prefix: `${keyBase}:{${runId}}` });
    await queue.add('episode', payload, { jobId: 'malformed-1', attempts: 5 });
    await queue.close();
  },
};

afterAll(async () => {
  const redis = new Redis(REDIS_URL);
  for (const base of keyBases) {
    await deleteKeysUnder(redis, base);
  }
  await redis.quit();
});

interface RunOptions {
  spec: RolloutRunSpecInput;
  poisoned?: string[];
  workers?: number;
  /** Stop the first trainer after this many batches and start a fresh one. */
  restartTrainerAfterBatches?: number;
  beforeStart?: (transport: Transport) => Promise<void>;
}

interface RunOutcome {
  summary: RunSummary;
  admissions: AdmissionEvent[];
  transport: Transport;
}

async function runWith(factory: TransportFactory, options: RunOptions): Promise<RunOutcome> {
  const transportFor = factory.open();
  const spec = RolloutRunSpecSchema.parse({ policy: 'toy', ...options.spec });
  const opened: Transport[] = [];
  const open = (): Transport => {
    const transport = transportFor();
    opened.push(transport);
    return transport;
  };
  const coordinatorTransport = open();
  await coordinatorTransport.registerRun(spec);
  await options.beforeStart?.(coordinatorTransport);
  const workers = Array.from({ length: options.workers ?? 2 }, (_, i) => {
    const transport = open();
    const worker = new RolloutWorker({
      transport,
      resolveRun: () => Promise.resolve({ policy: new ToyPolicy(), environments: toyEnvironments(options.poisoned) }),
      concurrency: 3,
      workerId: `w${i}`,
      discoveryMs: 50,
    });
    return worker;
  });
  for (const worker of workers) await worker.start();
  const admissions: AdmissionEvent[] = [];

  const trainerLoop = async (): Promise<void> => {
    const updater = new StatsPolicyUpdater();
    if (options.restartTrainerAfterBatches !== undefined) {
      const stop = new AbortController();
      let batches = 0;
      const first = await runTrainer({ transport: open(), runId: spec.run_id, updater, pollMs: 20, runWaitMs: 5_000, signal: stop.signal, onBatch: () => (++batches >= (options.restartTrainerAfterBatches ?? 0) ? stop.abort() : undefined) });
      if (first.finished) return;
    }
    await runTrainer({ transport: open(), runId: spec.run_id, updater: new StatsPolicyUpdater(), pollMs: 20, runWaitMs: 5_000 });
  };
  const trainerDone = trainerLoop();
  const summary = await runCoordinator({ transport: coordinatorTransport, spec, questions: TOY_QUESTIONS, pollMs: 20, onAdmit: (e) => admissions.push(e) });
  await trainerDone;
  await Promise.all(workers.map((w) => w.close()));
  const result = { summary, admissions, transport: coordinatorTransport };
  // Keep the coordinator's transport open for assertions on the store; close the rest.
  await Promise.all(opened.filter((t) => t !== coordinatorTransport).map((t) => t.close()));
  return result;
}

function runId(label: string): string {
  return `${label}-${randomBytes(3).toString('hex')}`;
}

describe.each([inProcess, bullmq])('rollout over the $name transport', (factory) => {
  it('plays every episode exactly once, within the staleness bound', async () => {
    const spec = { run_id: runId('full'), episodes: 48, group_size: 4, groups_per_batch: 2, max_staleness: 1, drop_zero_variance: true };
    const { summary, admissions, transport } = await runWith(factory, { spec });
    try {
      expect(summary.episodes_completed).toBe(48);
      expect(summary.episodes_consumed).toBe(48);
      expect(summary.lost_episodes).toBe(0);
      expect(summary.duplicate_trajectories).toBe(0);
      expect(summary.groups_failed).toBe(0);
      expect(summary.groups_trained + summary.groups_dropped).toBe(12);
      expect(summary.groups_dropped).toBeGreaterThan(0);
      expect(summary.policy_version).toBe(summary.batches);
      for (const admission of admissions) expect(admission.occupied).toBeLessThanOrEqual(admission.capacity);
      const batches = await transport.trainedBatches(spec.run_id);
      expect(batches.map((b) => b.version)).toEqual(batches.map((_, i) => i + 1));
      for (const batch of batches) expect(batch.max_staleness).toBeLessThanOrEqual(1);
      // Every trajectory was read back through TrajectorySchema for training, then deleted with its group.
      const left = transport instanceof BullmqTransport ? await transport.listBlobs(`${spec.run_id}/traj/`) : (transport.blobs as MemoryBlobStore).keys(`${spec.run_id}/traj/`);
      expect(left).toEqual([]);
      expect(summary.batches).toBeGreaterThan(0);
    } finally {
      await transport.close();
    }
  });

  it('at max_staleness 0 reproduces the synchronous loop batch for batch', async () => {
    const spec = { run_id: runId('sync'), episodes: 64, group_size: 4, groups_per_batch: 2, max_staleness: 0, seed: 7 };
    const poisoned = ['toy_q5'];
    const { summary, transport } = await runWith(factory, { spec: { ...spec, attempts: 2, backoff_ms: 5 }, poisoned });
    try {
      const reference = await runSynchronous({
        spec: RolloutRunSpecSchema.parse({ ...spec, attempts: 2, backoff_ms: 5, policy: 'toy' }),
        questions: TOY_QUESTIONS,
        resources: { policy: new ToyPolicy(), environments: toyEnvironments(poisoned) },
      });
      const batches = await transport.trainedBatches(spec.run_id);
      expect(batches.length).toBeGreaterThan(2);
      expect(batches).toEqual(reference.batches);
      expect(summary.groups_dropped).toBe(reference.droppedGroups);
      expect(summary.failed_groups.map((f) => f.group_id)).toEqual(reference.failedGroups.map((f) => f.group_id));
      for (const batch of batches) expect(batch.max_staleness).toBe(0);
    } finally {
      await transport.close();
    }
  });

  it('retries a poisoned question, then fails its group visibly and goes on', async () => {
    const spec = { run_id: runId('poison'), episodes: 28, group_size: 4, groups_per_batch: 2, max_staleness: 2, attempts: 2, backoff_ms: 5, drop_zero_variance: false };
    const { summary, transport } = await runWith(factory, { spec, poisoned: ['toy_q3'] });
    try {
      // 7 groups over 7 questions: exactly one plays toy_q3.
      expect(summary.groups_failed).toBe(1);
      expect(summary.failed_groups[0]?.reason).toMatch(/poisoned question toy_q3/);
      expect(summary.groups_trained).toBe(6);
      expect(summary.episodes_consumed).toBe(24);
      expect(summary.lost_episodes).toBe(0);
      expect(summary.duplicate_trajectories).toBe(0);
      expect(summary.episodes_failed).toBeGreaterThanOrEqual(1);
    } finally {
      await transport.close();
    }
  });

  it('survives a trainer restart without consuming anything twice', async () => {
    const spec = { run_id: runId('restart'), episodes: 48, group_size: 4, groups_per_batch: 2, max_staleness: 1, drop_zero_variance: false };
    const { summary, transport } = await runWith(factory, { spec, restartTrainerAfterBatches: 2 });
    try {
      expect(summary.groups_trained).toBe(12);
      expect(summary.policy_version).toBe(6);
      expect(summary.episodes_consumed).toBe(48);
      expect(summary.duplicate_trajectories).toBe(0);
      expect(summary.lost_episodes).toBe(0);
      const batches = await transport.trainedBatches(spec.run_id);
      expect(new Set(batches.flatMap((b) => b.group_ids)).size).toBe(12);
      // A finished run is no longer active (and stays so when listed again).
      expect(await transport.activeRuns()).not.toContain(spec.run_id);
      expect(await transport.activeRuns()).not.toContain(spec.run_id);
    } finally {
      await transport.close();
    }
  });

  it('re-admitting groups that are already there (a restarted coordinator) adds nothing', async () => {
    const spec = RolloutRunSpecSchema.parse({ policy: 'toy', run_id: runId('readmit'), episodes: 16, group_size: 4, groups_per_batch: 2 });
    const transport = factory.open()();
    try {
      await transport.registerRun(spec);
      const schedule = new QuestionSchedule(TOY_QUESTIONS, spec.seed);
      const admission = (seq: number): GroupAdmission => buildGroup(spec, schedule, seq, 0);
      await transport.admitGroups(spec, [admission(0), admission(1)]);
      // The second chunk overlaps the first: seq 1 must not be added twice.
      await transport.admitGroups(spec, [admission(1), admission(2)]);
      expect((await transport.counters(spec.run_id)).admittedGroups).toBe(3);
      expect((await transport.queueDepth(spec.run_id)).waiting).toBe(12);
      // An old chunk never moves the admitted count back.
      await transport.admitGroups(spec, [admission(0)]);
      expect((await transport.counters(spec.run_id)).admittedGroups).toBe(3);
      expect((await transport.queueDepth(spec.run_id)).waiting).toBe(12);
    } finally {
      await transport.close();
    }
  });

  it('a trainer that starts behind pages through a buffer bigger than one read', async () => {
    // 24 scored groups wait before the trainer starts; it reads 16 at a time (2 × B, at least 16).
    const spec = RolloutRunSpecSchema.parse({ policy: 'toy', run_id: runId('backlog'), episodes: 96, group_size: 4, groups_per_batch: 2, max_staleness: 100, drop_zero_variance: true });
    const transportFor = factory.open();
    const transport = transportFor();
    const trainerTransport = transportFor();
    const worker = new RolloutWorker({ transport: transportFor(), resolveRun: () => Promise.resolve({ policy: new ToyPolicy(), environments: toyEnvironments() }), concurrency: 8, workerId: 'w0', discoveryMs: 50 });
    try {
      await transport.registerRun(spec);
      const schedule = new QuestionSchedule(TOY_QUESTIONS, spec.seed);
      await transport.admitGroups(spec, Array.from({ length: 24 }, (_, seq) => buildGroup(spec, schedule, seq, 0)));
      await transport.closeAdmission(spec.run_id, 24);
      const scorer = transport.consumeGroups(spec.run_id, (group, results) => scoreGroup(spec, group, results));
      await worker.start();
      for (let i = 0; i < 400 && (await transport.counters(spec.run_id)).scoredPending < 24; i++) await new Promise((r) => setTimeout(r, 25));
      await scorer.close();
      expect((await transport.counters(spec.run_id)).scoredPending).toBe(24);
      const result = await runTrainer({ transport: trainerTransport, runId: spec.run_id, updater: new StatsPolicyUpdater(), pollMs: 20, runWaitMs: 5_000 });
      expect(result.finished).toBe(true);
      const counters = await transport.counters(spec.run_id);
      expect(counters.trainedGroups + counters.droppedGroups).toBe(24);
      expect(counters.consumedEpisodes).toBe(96);
      expect(counters.duplicateTrajectories).toBe(0);
      expect(counters.scoredPending).toBe(0);
      expect(counters.done).toBe(true);
    } finally {
      await worker.close();
      await trainerTransport.close();
      await transport.close();
    }
  });

  it('fails a malformed job at once with a validation reason', async () => {
    const spec = { run_id: runId('malformed'), episodes: 8, group_size: 4, groups_per_batch: 2 };
    const transportFor = factory.open();
    const transport = transportFor();
    const parsed = RolloutRunSpecSchema.parse({ policy: 'toy', ...spec });
    await transport.registerRun(parsed);
    await factory.injectMalformed(transport, spec.run_id, { episode_id: 'x', seed: 'not a number' });
    const events: EpisodeEvent[] = [];
    const consumer = transport.consumeEpisodes(spec.run_id, () => Promise.reject(new Error('must not run')), { concurrency: 1, onEvent: (e) => events.push(e) });
    try {
      for (let i = 0; i < 200 && events.length === 0; i++) await new Promise((r) => setTimeout(r, 25));
      expect(events).toHaveLength(1);
      const [event] = events;
      expect(event?.type).toBe('failed');
      if (event?.type === 'failed') {
        expect(event.final).toBe(true);
        expect(event.attempt).toBe(1);
        expect(event.reason).toMatch(/^VALIDATION: malformed episode job/);
      }
      expect((await transport.counters(spec.run_id)).failedEpisodes).toBe(1);
    } finally {
      await consumer.close();
      await transport.close();
    }
  });
});
