import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunSummary } from '@sqlenv/rollout';
import { prepareBuiltinDataset } from '@sqlenv/sql-env/testing';
import { logTail, startApp, waitFor, type AppProcess, stopAppsAndDeleteKeys } from '@sqlenv/rollout/testing';

/**
 * A trainer killed between writing the weights of version v and committing them: the commit never
 * happened, so version, consumed groups and the weights history are those of v − 1; the next
 * trainer redoes the batch, commits v with weights of its own, deletes the dead trainer's blob, and
 * the run ends with every group trained once and only the retained weights left.
 */
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const keyBase = `test-${randomBytes(4).toString('hex')}`;
const runId = `crash-${randomBytes(3).toString('hex')}`;
const prefix = `${keyBase}:{${runId}}`;
const EPISODES = 48;
const redis = new Redis(REDIS_URL);
const apps: AppProcess[] = [];

async function weightBlobs(): Promise<string[]> {
  const keys = await redis.keys(`${prefix}:blob:weights/*`);
  return keys.filter((k) => !k.includes('#')).map((k) => `${runId}/${k.slice(`${prefix}:blob:`.length)}`).sort();
}

beforeAll(() => prepareBuiltinDataset(), 120_000);

afterAll(() => stopAppsAndDeleteKeys(apps, redis, keyBase));

describe('a trainer killed between its weights write and its commit', () => {
  it('leaves the committed state untouched; the next trainer redoes the batch and deletes the orphan', async () => {
    const common = ['--redis', REDIS_URL, '--key-base', keyBase, '--poll-ms', '100'];
    const coordinator = startApp('coordinator', 'crash-coordinator', [...common, '--run', runId, '--dataset', 'builtin', '--policy', 'oracle', '--episodes', String(EPISODES), '--group-size', '4', '--groups-per-batch', '2', '--max-staleness', '1', '--drop-zero-variance', 'false'], {});
    const worker = startApp('worker', 'crash-worker', [...common, '--run', runId, '--concurrency', '8', '--executor-pool-size', '1', '--discovery-ms', '200'], {});
    apps.push(coordinator, worker);
    const logs = (): string => apps.map((a) => logTail(a)).join('\n');

    const dying = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'packages/rollout/src/testing/dying-trainer.ts'), REDIS_URL, keyBase, runId, '3'], { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    dying.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    const signal = await new Promise<string | null>((resolve) => dying.once('exit', (_code, sig) => resolve(sig)));
    expect(signal).toBe('SIGKILL');
    const orphan = (JSON.parse(out.trim()) as { died_after_writing: string }).died_after_writing;

    // The write happened, the commit did not.
    const state = await redis.hgetall(`${prefix}:state`);
    expect(Number(state['version'])).toBe(2);
    const committed = await redis.zrange(`${prefix}:weights`, 0, -1);
    expect(committed).not.toContain(orphan);
    expect(state['weights_key']).not.toBe(orphan);
    expect(await weightBlobs()).toContain(orphan);
    expect(await redis.bitcount(`${prefix}:consumed-groups`)).toBe(4);

    const trainer = startApp('trainer', 'crash-trainer', [...common, '--run', runId, '--keep-weights', '2'], {});
    apps.push(trainer);
    expect(await coordinator.exited, logs()).toBe(0);
    const summary = JSON.parse(coordinator.stdout().trim()) as RunSummary;
    expect(summary).toMatchObject({ episodes_consumed: EPISODES, groups_trained: EPISODES / 4, duplicate_trajectories: 0, lost_episodes: 0, policy_version: EPISODES / 4 / 2 });
    expect(await trainer.exited).toBe(0);
    const batches = (await redis.lrange(`${prefix}:batches`, 0, -1)).map((b) => JSON.parse(b) as { version: number });
    expect(batches.map((b) => b.version)).toEqual(Array.from({ length: EPISODES / 8 }, (_, i) => i + 1));

    // The restarted trainer deleted the dead one's blob; only the newest 2 committed weights remain.
    await waitFor(async () => !(await weightBlobs()).includes(orphan), 10_000, `orphan deleted\n${logs()}`);
    const finalCommitted = await redis.zrange(`${prefix}:weights`, 0, -1);
    expect(finalCommitted.length).toBe(2);
    expect(await weightBlobs()).toEqual([...finalCommitted].sort());
    expect(finalCommitted).toContain(await redis.hget(`${prefix}:state`, 'weights_key'));
  }, 180_000);
});
