import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunSummary } from '@sqlenv/rollout';
import { prepareBuiltinDataset } from '@sqlenv/sql-env/testing';
import { logTail, startApp, waitFor, type AppProcess, stopAppsAndDeleteKeys } from '@sqlenv/rollout/testing';

/**
 * Two runs at once on one fleet, the way docker-compose.yml runs them: two workers and two trainers
 * started without a run id (workers serve every active run; each trainer takes a run no other
 * trainer holds, through a lease in Redis), then two coordinators with different run ids. Both runs
 * finish, each exactly once, each trained by one trainer, and every worker played both.
 */
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const keyBase = `test-${randomBytes(4).toString('hex')}`;
const runs = [`two-a-${randomBytes(2).toString('hex')}`, `two-b-${randomBytes(2).toString('hex')}`];
const EPISODES = 96;
const redis = new Redis(REDIS_URL);
const apps: AppProcess[] = [];
const common = ['--redis', REDIS_URL, '--key-base', keyBase, '--poll-ms', '100'];

beforeAll(() => prepareBuiltinDataset(), 120_000);

afterAll(() => stopAppsAndDeleteKeys(apps, redis, keyBase));

describe('two runs sharing one set of workers and trainers', () => {
  it('finishes both runs exactly once, each with its own trainer, on the same workers', async () => {
    const workers = ['fleet-w1', 'fleet-w2'].map((name) => startApp('worker', name, [...common, '--concurrency', '4', '--worker-id', name, '--executor-pool-size', '1', '--discovery-ms', '200'], {}));
    const trainers = ['fleet-t1', 'fleet-t2'].map((name) => startApp('trainer', name, [...common, '--trainer-id', name, '--trainer-lease-ms', '3000'], {}));
    apps.push(...workers, ...trainers);
    const coordinators = runs.map((runId) =>
      startApp('coordinator', `coordinator-${runId}`, [...common, '--run', runId, '--dataset', 'builtin', '--policy', 'oracle', '--episodes', String(EPISODES), '--group-size', '4', '--groups-per-batch', '2', '--max-staleness', '1', '--drop-zero-variance', 'false'], {}),
    );
    apps.push(...coordinators);
    const logs = (): string => apps.map((a) => logTail(a, 15)).join('\n');

    const codes = await Promise.all(coordinators.map((c) => c.exited));
    expect(codes, logs()).toEqual([0, 0]);
    const summaries = coordinators.map((c) => JSON.parse(c.stdout().trim()) as RunSummary);
    for (const [i, summary] of summaries.entries()) {
      expect(summary).toMatchObject({ run_id: runs[i], episodes_completed: EPISODES, episodes_consumed: EPISODES, duplicate_trajectories: 0, lost_episodes: 0, groups_failed: 0, groups_trained: EPISODES / 4 });
    }

    // Each run was trained to its end by exactly one trainer, and the two trainers split the runs.
    await waitFor(async () => Promise.resolve(trainers.map((t) => t.stdout()).join('').split('\n').filter((l) => l.includes('"finished":true')).length >= 2), 20_000, `trainer reports\n${logs()}`);
    const trained = trainers.map((t) => t.stdout().trim().split('\n').filter(Boolean).map((line) => JSON.parse(line) as { run_id: string; finished: boolean }));
    expect(trained.flat().filter((r) => r.finished).map((r) => r.run_id).sort()).toEqual([...runs].sort());
    expect(trained.map((lines) => lines.length)).toEqual([1, 1]);

    // Both workers served both runs (they attach to every active run they discover).
    for (const worker of workers) {
      const log = readFileSync(worker.logFile, 'utf8');
      for (const runId of runs) expect(log, worker.name).toMatch(new RegExp(`"runId":"${runId}"[^\\n]*worker attached to run`));
    }
  }, 240_000);
});
