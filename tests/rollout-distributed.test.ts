import { randomBytes } from 'node:crypto';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { episodeJobId, parseEpisodeJobId, type RunSummary } from '@sqlenv/rollout';
import { prepareBuiltinDataset } from '@sqlenv/sql-env/testing';
import { logTail, startApp, waitFor, type AppProcess, stopAppsAndDeleteKeys, scanKeys } from '@sqlenv/rollout/testing';

/**
 * The real thing: coordinator + 3 workers + trainer as separate processes
 * (the apps' main.ts), the oracle on the built-in dataset, 300 episodes. One
 * worker is SIGKILLed mid-run and a new one started; the trainer is SIGKILLed
 * and restarted. Every episode must reach the trainer exactly once.
 */
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const keyBase = `test-${randomBytes(4).toString('hex')}`;
const runId = `dist-${randomBytes(3).toString('hex')}`;
const prefix = `${keyBase}:{${runId}}`;
const EPISODES = 300;
const GROUP_SIZE = 4;
const GROUPS_PER_BATCH = 4;

const redis = new Redis(REDIS_URL);
const apps: AppProcess[] = [];

// Short locks so a killed worker's jobs come back within seconds, not the production 30 s.
const common = ['--redis', REDIS_URL, '--key-base', keyBase, '--lock-duration-ms', '2000', '--stalled-interval-ms', '1000', '--poll-ms', '100'];

beforeAll(() => prepareBuiltinDataset(), 120_000);

afterAll(() => stopAppsAndDeleteKeys(apps, redis, keyBase));

async function state(): Promise<Record<string, string>> {
  return redis.hgetall(`${prefix}:state`);
}

function worker(name: string): AppProcess {
  const app = startApp('worker', name, [...common, '--run', runId, '--concurrency', '8', '--worker-id', name, '--executor-pool-size', '1', '--discovery-ms', '200'], {});
  apps.push(app);
  return app;
}

/** A worker configured the way docker-compose configures one: environment variables only. */
const envWorkerMetricsPort = 30_000 + Math.floor(Math.random() * 20_000);
function envWorker(name: string): AppProcess {
  const app = startApp('worker', name, [], {
    REDIS_URL,
    RUN_ID: runId,
    SQLENV_KEY_BASE: keyBase,
    SQLENV_CONCURRENCY: '8',
    SQLENV_WORKER_ID: name,
    SQLENV_EXECUTOR_POOL_SIZE: '1',
    SQLENV_DISCOVERY_MS: '200',
    SQLENV_LOCK_DURATION_MS: '2000',
    SQLENV_STALLED_INTERVAL_MS: '1000',
    SQLENV_POLL_MS: '100',
    METRICS_PORT: String(envWorkerMetricsPort),
    SQLENV_METRICS_HOST: '127.0.0.1',
  });
  apps.push(app);
  return app;
}

function trainer(name: string): AppProcess {
  // A short trainer lease: the replacement of a killed trainer takes the run over within seconds.
  const app = startApp('trainer', name, [...common, '--run', runId, '--trainer-lease-ms', '2000'], {});
  apps.push(app);
  return app;
}

describe('distributed rollout across processes', () => {
  it('completes 300 episodes exactly once through a worker kill and a trainer restart', async () => {
    const episodesQueue = new Queue('episodes', { connection: { url: REDIS_URL }, prefix });
    try {
      const firstTrainer = trainer('trainer-1');
      const workers = [worker('worker-1'), worker('worker-2'), envWorker('worker-3')];
      const coordinator = startApp(
        'coordinator',
        'coordinator',
        [...common, '--run', runId, '--dataset', 'builtin', '--policy', 'oracle', '--episodes', String(EPISODES), '--group-size', String(GROUP_SIZE), '--groups-per-batch', String(GROUPS_PER_BATCH), '--max-staleness', '2', '--drop-zero-variance', 'false', '--backoff-ms', '50'],
        {},
      );
      apps.push(coordinator);
      const logs = (): string => apps.map((a) => logTail(a)).join('\n');

      // Kill worker-1 while it holds episodes, then start a replacement.
      let killedWhileHolding = 0;
      await waitFor(
        async () => {
          const active = await episodesQueue.getActive();
          killedWhileHolding = active.filter((job) => job.processedBy === 'worker-1').length;
          return killedWhileHolding > 0 && Number((await state())['admitted'] ?? 0) >= 10;
        },
        60_000,
        `worker-1 holding episodes\n${logs()}`,
      );
      workers[0]?.child.kill('SIGKILL');
      worker('worker-4');

      // The env-configured worker serves metrics and status like a compose container.
      const metricsUrl = `http://127.0.0.1:${envWorkerMetricsPort}/metrics`;
      await waitFor(async () => /sqlenv_episodes_completed_total\{run="dist-[0-9a-f]+"\} [1-9]/.test(await (await fetch(metricsUrl)).text()), 60_000, `worker-3 metrics\n${logs()}`);
      const status = (await (await fetch(`http://127.0.0.1:${envWorkerMetricsPort}/status`)).json()) as { worker_id: string; runs: string[] };
      expect(status).toMatchObject({ worker_id: 'worker-3', runs: [runId] });

      // Kill the trainer once it has trained a few batches; start another.
      await waitFor(async () => Number((await state())['version'] ?? 0) >= 3, 60_000, `trainer progress\n${logs()}`);
      firstTrainer.child.kill('SIGKILL');
      await firstTrainer.exited;
      const secondTrainer = trainer('trainer-2');

      const code = await coordinator.exited;
      expect(code, logs()).toBe(0);
      const summary = JSON.parse(coordinator.stdout().trim()) as RunSummary;
      expect(summary).toMatchObject({
        episodes_completed: EPISODES,
        episodes_consumed: EPISODES,
        episodes_failed: 0,
        groups_failed: 0,
        duplicate_trajectories: 0,
        lost_episodes: 0,
        groups_trained: EPISODES / GROUP_SIZE,
      });
      expect(summary.episodes_per_s).toBeGreaterThan(0);
      expect(await secondTrainer.exited).toBe(0);

      // The same facts straight from Redis.
      const finalState = await state();
      expect(finalState['done']).toBe('1');
      expect(Number(finalState['trained_groups'])).toBe(EPISODES / GROUP_SIZE);
      expect(Number(finalState['duplicate_trajectories'])).toBe(0);
      // Every episode slot (seq × G + index) was stored and trained on exactly once: the bitmaps hold
      // one bit per episode, and the trained-on count comes from the trajectories themselves.
      expect(await redis.bitcount(`${prefix}:completed-episodes`)).toBe(EPISODES);
      expect(await redis.bitcount(`${prefix}:trained-episodes`)).toBe(EPISODES);
      expect(await redis.bitcount(`${prefix}:consumed-groups`)).toBe(EPISODES / GROUP_SIZE);
      const expected = Array.from({ length: EPISODES }, (_, e) => episodeJobId(runId, Math.floor(e / GROUP_SIZE), GROUPS_PER_BATCH, e % GROUP_SIZE));
      for (const id of expected) {
        const parsed = parseEpisodeJobId(runId, id, GROUPS_PER_BATCH);
        expect(await redis.getbit(`${prefix}:trained-episodes`, (parsed?.seq ?? -1) * GROUP_SIZE + (parsed?.index ?? 0))).toBe(1);
      }
      // Trained trajectories were deleted with their groups: no trajectory blob and no trash left.
      expect(await scanKeys(redis, `${prefix}:blob:traj/*`)).toEqual([]);
      expect(await redis.llen(`${prefix}:trash`)).toBe(0);
      const batches = (await redis.lrange(`${prefix}:batches`, 0, -1)).map((b) => JSON.parse(b) as { version: number; group_ids: string[] });
      expect(batches.map((b) => b.version)).toEqual(batches.map((_, i) => i + 1));
      const trainedGroups = batches.flatMap((b) => b.group_ids);
      expect(new Set(trainedGroups).size).toBe(trainedGroups.length);
      expect(trainedGroups.length).toBe(EPISODES / GROUP_SIZE);
      // The killed worker's episodes were recovered as stalled jobs and played again under the same ids.
      const completed = await episodesQueue.getCompleted(0, -1);
      const stalled = completed.filter((job) => job.stalledCounter > 0);
      expect(killedWhileHolding).toBeGreaterThan(0);
      expect(stalled.length).toBeGreaterThan(0);
      for (const job of stalled) expect(job.processedBy).not.toBe('worker-1');
    } finally {
      await episodesQueue.close();
    }
  }, 150_000);
});
