import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RolloutRunSpecSchema } from '@sqlenv/protocol';
import { BullmqTransport, RolloutWorker, runCoordinator, runTrainer, StatsPolicyUpdater, type BullmqTransportConfigInput } from '@sqlenv/rollout';
import { runsCommand } from '@sqlenv/cli';
import { startPrivateRedis, type PrivateRedis, TOY_QUESTIONS, ToyPolicy, toyEnvironments } from '@sqlenv/rollout/testing';

/**
 * Runs clean up after themselves (docs/operations.md, "Clean-up"): a long run's Redis memory stays
 * flat once the bounded structures (kept jobs, event streams, batch records) are full, and the
 * `runs` commands list, show, pin, expire and delete what is left. A Redis of the test's own, so
 * INFO memory sees nothing but this run.
 */
let redis: PrivateRedis;
let client: Redis;
const keyBase = `ret-${randomBytes(3).toString('hex')}`;
// Small bounds so the run reaches its steady state within a test's few thousand episodes.
const bounded: BullmqTransportConfigInput = { keepCompletedEpisodes: 32, keepCompletedGroups: 16, keepBatches: 16, eventsMaxLen: 200, lockDurationMs: 5_000 };

beforeAll(async () => {
  redis = await startPrivateRedis();
  client = new Redis(redis.url);
});

afterAll(async () => {
  client.disconnect();
  await redis.kill();
});

async function usedMemory(): Promise<number> {
  const info = await client.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)?.[1]);
}

async function runCommand(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const stdout = new Writable({ write: (chunk: Buffer, _e, done) => ((out += chunk.toString()), done()) });
  const stderr = new Writable({ write: (chunk: Buffer, _e, done) => ((err += chunk.toString()), done()) });
  const code = await runsCommand(argv, { stdout, stderr, env: { REDIS_URL: redis.url, SQLENV_KEY_BASE: keyBase } });
  return { code, out, err };
}

describe('run retention', () => {
  const runId = `long-${randomBytes(2).toString('hex')}`;
  const EPISODES = 2_400;

  it('keeps Redis memory flat over a long run after warm-up', async () => {
    const spec = RolloutRunSpecSchema.parse({ run_id: runId, policy: 'toy', episodes: EPISODES, group_size: 4, groups_per_batch: 4, max_staleness: 1, drop_zero_variance: false, seed: 3 });
    const open = (): BullmqTransport => new BullmqTransport({ redisUrl: redis.url, keyBase, ...bounded });
    const [coordinatorTransport, workerTransport, trainerTransport] = [open(), open(), open()];
    const samples: Array<{ episodes: number; bytes: number }> = [];
    try {
      await coordinatorTransport.registerRun(spec);
      const worker = new RolloutWorker({ transport: workerTransport, resolveRun: () => Promise.resolve({ policy: new ToyPolicy(), environments: toyEnvironments() }), concurrency: 16, workerId: 'w', discoveryMs: 50 });
      await worker.start();
      let sampling = Promise.resolve();
      const trainer = runTrainer({
        transport: trainerTransport,
        runId,
        updater: new StatsPolicyUpdater(),
        pollMs: 20,
        runWaitMs: 5_000,
        retention: { keepLast: 2, checkpointEvery: 0 },
        onBatch: (stats) => {
          // Every 10th batch (160 episodes): what Redis holds now.
          if (stats.version % 10 === 0) sampling = sampling.then(async () => void samples.push({ episodes: stats.version * 16, bytes: await usedMemory() }));
        },
      });
      const summary = await runCoordinator({ transport: coordinatorTransport, spec, questions: TOY_QUESTIONS, pollMs: 20 });
      await trainer;
      await sampling;
      await worker.close();
      expect(summary).toMatchObject({ episodes_consumed: EPISODES, duplicate_trajectories: 0, lost_episodes: 0 });
      // Warm-up: until the kept-job, event-stream and batch-record bounds fill (a few hundred episodes).
      const afterWarmUp = samples.filter((s) => s.episodes >= 800);
      const first = afterWarmUp[0];
      const last = afterWarmUp.at(-1);
      if (!first || !last) throw new Error(`too few memory samples: ${JSON.stringify(samples)}`);
      const perEpisode = (last.bytes - first.bytes) / (last.episodes - first.episodes);
      if (process.env["RETENTION_DEBUG"]) process.stderr.write(`${JSON.stringify({ perEpisode, samples })}\n`);
      // Without deletion each episode leaves its trajectory (~1 KB here, tens of KB with an LLM's
      // tokens), its job and its set entries behind; what remains per episode is bits of bitmaps.
      expect(perEpisode, JSON.stringify(samples)).toBeLessThan(16);
      expect(Math.max(...afterWarmUp.map((s) => s.bytes)) - Math.min(...afterWarmUp.map((s) => s.bytes)), JSON.stringify(samples)).toBeLessThan(512 * 1024);
      // Nothing of the trained data is left: no trajectory, only the 2 newest weights.
      expect(await coordinatorTransport.listBlobs(`${runId}/traj/`)).toEqual([]);
      expect((await coordinatorTransport.listBlobs(`${runId}/weights/`)).length).toBe(2);
    } finally {
      await Promise.all([coordinatorTransport.close(), workerTransport.close(), trainerTransport.close()]);
    }
  }, 240_000);

  it('lists, shows, pins, expires and deletes runs', async () => {
    const list = await runCommand(['list', '--json']);
    expect(list.code, list.err).toBe(0);
    expect(JSON.parse(list.out)).toEqual([expect.objectContaining({ run_id: runId, state: 'done', episodes: EPISODES, expires_in_s: null })]);

    const show = await runCommand(['show', runId, '--json']);
    expect(show.code, show.err).toBe(0);
    const details = JSON.parse(show.out) as { keys: number; memory_bytes: number; weights: Array<{ version: number }>; scored_pending: number; trash_pending: number };
    expect(details.weights.map((w) => w.version)).toEqual([EPISODES / 16 - 1, EPISODES / 16]);
    expect(details).toMatchObject({ scored_pending: 0, trash_pending: 0 });
    expect(details.memory_bytes).toBeGreaterThan(0);
    expect((await runCommand(['show', runId])).out).toMatch(new RegExp(`run ${runId} \\(done, version ${EPISODES / 16}\\)`));

    const pin = await runCommand(['checkpoint', runId, 'best', '--version', String(EPISODES / 16 - 1), '--json']);
    expect(pin.code, pin.err).toBe(0);
    expect(JSON.parse(pin.out)).toMatchObject({ name: 'best', version: EPISODES / 16 - 1 });
    expect((await runCommand(['checkpoint', runId, 'old', '--version', '1'])).err).toMatch(/no retained weights for version 1/);

    // An active run is not deleted without --force; a finished one expires, then goes.
    const active = RolloutRunSpecSchema.parse({ run_id: `active-${randomBytes(2).toString('hex')}`, policy: 'toy', episodes: 8, group_size: 4 });
    const transport = new BullmqTransport({ redisUrl: redis.url, keyBase });
    await transport.registerRun(active);
    await transport.close();
    const refused = await runCommand(['delete', active.run_id]);
    expect(refused.code).toBe(2);
    expect(refused.err).toMatch(/still active .* --force/);
    expect((await runCommand(['delete', active.run_id, '--force'])).code).toBe(0);

    const { RunAdmin } = await import('@sqlenv/rollout');
    const admin = new RunAdmin({ redisUrl: redis.url, keyBase });
    try {
      // Every key of the run, plus the checkpoints hash the pin created.
      expect(await admin.expire(runId, 1)).toBe(details.keys + 1);
      expect(JSON.parse((await runCommand(['list', '--json'])).out)).toEqual([expect.objectContaining({ run_id: runId, expires_in_s: expect.any(Number) as number })]);
      await new Promise((resolve) => setTimeout(resolve, 2_500));
      // Expired: the listing shows it one last time as expired and forgets it.
      expect(JSON.parse((await runCommand(['list', '--json'])).out)).toEqual([expect.objectContaining({ run_id: runId, state: 'expired' })]);
      expect(JSON.parse((await runCommand(['list', '--json'])).out)).toEqual([]);
      expect(await client.dbsize()).toBeLessThan(5);
    } finally {
      await admin.close();
    }
    expect((await runCommand(['show', 'nope'])).err).toMatch(/NOT_FOUND: no run nope/);
    expect((await runCommand(['frobnicate'])).code).toBe(2);
  }, 60_000);
});
