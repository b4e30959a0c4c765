import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EpisodeResult } from '@sqlenv/protocol';
import type { RunSummary } from '@sqlenv/rollout';
import { prepareBuiltinDataset } from '@sqlenv/sql-env/testing';
import { logTail, startApp, waitFor, type AppProcess, stopAppsAndDeleteKeys } from '@sqlenv/rollout/testing';

/**
 * A worker paused past its job lock (SIGSTOP: a long GC, a VM pause) resumes and finishes episodes
 * that another worker has already completed. With a sampling policy the two attempts differ; the
 * trainer must only ever train on the attempt whose completion BullMQ accepted, with the reward its
 * group was scored with. Workers here are processes of a fixture that samples differently per
 * process and reports every trajectory store attempt.
 */
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const keyBase = `test-${randomBytes(4).toString('hex')}`;
const runId = `fence-${randomBytes(3).toString('hex')}`;
const prefix = `${keyBase}:{${runId}}`;
const EPISODES = 64;
const LOCK = ['--lock-duration-ms', '1000', '--stalled-interval-ms', '500'];
const redis = new Redis(REDIS_URL);
const apps: AppProcess[] = [];
const children: ChildProcess[] = [];

interface StoreEvent {
  event: 'stored' | 'refused' | 'started';
  worker: string;
  episode_id?: string;
  key?: string;
  reward?: number;
}

function samplingWorker(name: string): { child: ChildProcess; events: () => StoreEvent[]; stderr: () => string } {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'packages/rollout/src/testing/sampling-worker.ts'), REDIS_URL, keyBase, runId, name, '1000', '500'], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  let err = '';
  child.stdout?.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (err += chunk.toString()));
  return {
    child,
    events: () => out.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as StoreEvent),
    stderr: () => err.slice(-3000),
  };
}

beforeAll(() => prepareBuiltinDataset(), 120_000);

afterAll(async () => {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGCONT');
      child.kill('SIGKILL');
    }
  }
  await stopAppsAndDeleteKeys(apps, redis, keyBase);
});

describe('fenced trajectory writes', () => {
  it('trains only on the accepted attempt when a paused worker resumes after its lock expired', async () => {
    const episodes = new Queue('episodes', { connection: { url: REDIS_URL }, prefix });
    try {
      const common = ['--redis', REDIS_URL, '--key-base', keyBase, '--poll-ms', '100', ...LOCK];
      const trainer = startApp('trainer', 'fence-trainer', [...common, '--run', runId], {});
      const coordinator = startApp('coordinator', 'fence-coordinator', [...common, '--run', runId, '--dataset', 'builtin', '--policy', 'random', '--episodes', String(EPISODES), '--group-size', '4', '--groups-per-batch', '2', '--max-staleness', '2', '--drop-zero-variance', 'false'], {});
      apps.push(trainer, coordinator);
      const a = samplingWorker('worker-a');
      const logs = (): string => `${apps.map((x) => logTail(x)).join('\n')}\n--- worker-a ---\n${a.stderr()}`;

      // Pause worker-a while it holds episodes, well past its 1 s lock.
      let held: string[] = [];
      await waitFor(
        async () => {
          held = (await episodes.getActive()).filter((job) => job.processedBy === 'worker-a').map((job) => String(job.id));
          return held.length >= 2;
        },
        60_000,
        `worker-a holding episodes\n${logs()}`,
      );
      a.child.kill('SIGSTOP');
      const b = samplingWorker('worker-b');
      // worker-b finds the stalled jobs and completes at least one of them while worker-a sleeps.
      await waitFor(
        async () => {
          const jobs = await Promise.all(held.map((id) => episodes.getJob(id)));
          return jobs.some((job) => job?.finishedOn !== undefined && job.processedBy === 'worker-b');
        },
        60_000,
        `worker-b completing worker-a's episodes\n${logs()}\n--- worker-b ---\n${b.stderr()}`,
      );
      a.child.kill('SIGCONT');

      expect(await coordinator.exited, logs()).toBe(0);
      const summary = JSON.parse(coordinator.stdout().trim()) as RunSummary;
      expect(summary).toMatchObject({ episodes_consumed: EPISODES, duplicate_trajectories: 0, lost_episodes: 0, groups_failed: 0, groups_trained: EPISODES / 4 });
      // The trainer refuses a batch whose trajectories differ from their scored groups: it finished cleanly.
      expect(await trainer.exited, logs()).toBe(0);
      expect(JSON.parse(trainer.stdout().trim().split('\n').at(-1) ?? '{}')).toMatchObject({ run_id: runId, finished: true });

      await waitFor(async () => Promise.resolve(a.events().some((e) => e.event !== 'started' && held.includes(e.episode_id ?? ''))), 20_000, 'worker-a finishing its paused episodes');
      const events = [...a.events(), ...b.events()].filter((e) => e.event === 'stored');
      const storedBy = new Map(events.map((e) => [e.key, e]));
      // Every completion BullMQ accepted names a trajectory its own worker stored, with the reward it returned.
      const completed = await episodes.getCompleted(0, -1);
      expect(completed.length).toBe(EPISODES);
      for (const job of completed) {
        const result = job.returnvalue as EpisodeResult;
        const stored = storedBy.get(result.trajectory_key);
        expect(stored?.worker, job.id).toBe(job.processedBy);
        expect(stored?.reward).toBe(result.reward);
      }
      // worker-a's late attempts for the episodes taken from it were stored under their own keys (or
      // refused once the group was consumed), never over the accepted trajectory.
      const late = a.events().filter((e) => (e.event === 'stored' || e.event === 'refused') && held.includes(e.episode_id ?? ''));
      expect(late.length).toBeGreaterThan(0);
      // (Usually worker-b's attempt is the accepted one; on a loaded machine the episode can stall once more
      // and worker-a, resumed, may win it with a fresh attempt: what matters is whose attempt BullMQ credited.)
      const accepted = new Map(completed.map((job) => [String(job.id), { key: (job.returnvalue as EpisodeResult).trajectory_key, worker: job.processedBy }]));
      for (const attempt of late) {
        const winner = accepted.get(attempt.episode_id ?? '');
        if (attempt.event === 'stored' && winner?.key !== attempt.key) expect(storedBy.get(winner?.key)?.worker).toBe(winner?.worker);
      }
      expect(completed.filter((job) => held.includes(String(job.id))).some((job) => job.processedBy === 'worker-b')).toBe(true);
      // Every attempt, accepted or not, was deleted once its group was trained.
      const left = await redis.keys(`${prefix}:blob:traj/*`);
      expect(left).toEqual([]);
      b.child.kill('SIGTERM');
      a.child.kill('SIGTERM');
    } finally {
      await episodes.close();
    }
  }, 240_000);
});
