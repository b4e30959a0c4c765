import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeOptimizerState } from '@sqlenv/grpo';
import { decodeAdapter, presetConfig, writeRandomCheckpoint } from '@sqlenv/model';
import { BullmqTransport, type RunSummary } from '@sqlenv/rollout';
import { writeTinySpider } from '@sqlenv/sql-env/testing';
import { logTail, startApp, type AppProcess, stopAppsAndDeleteKeys } from '@sqlenv/rollout/testing';

/**
 * The model policy across processes: coordinator + 2 workers + trainer (the
 * apps' main.ts) over real Redis, a tiny random Qwen3 playing the episodes.
 * Each worker loads its own copy of the model (`--model DIR`, checked against
 * the run spec's fingerprint) and serves its episodes from one batched
 * inference engine. The run must finish with every episode trained exactly
 * once by the GRPO trainer (its own `--model DIR`), whose adapter and optimizer
 * state are committed with each version.
 */
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const keyBase = `test-llm-${randomBytes(4).toString('hex')}`;
const runId = `llm-${randomBytes(3).toString('hex')}`;
const EPISODES = 16;
const GROUP_SIZE = 2;
const GROUPS_PER_BATCH = 2;
const root = mkdtempSync(join(tmpdir(), 'sqlenv-llm-dist-'));
const modelDir = join(root, 'tiny');
let spiderDir: string;
const redis = new Redis(REDIS_URL);
const apps: AppProcess[] = [];
const common = ['--redis', REDIS_URL, '--key-base', keyBase, '--poll-ms', '100'];
const env = { SQLENV_CACHE_DIR: join(root, 'cache') };

beforeAll(async () => {
  writeRandomCheckpoint(modelDir, presetConfig('tiny-qwen3'), { seed: 11, initStd: 0.1 });
  spiderDir = await writeTinySpider();
});

afterAll(async () => {
  await stopAppsAndDeleteKeys(apps, redis, keyBase);
  rmSync(root, { recursive: true, force: true });
  rmSync(spiderDir, { recursive: true, force: true });
});

describe('the model policy in the distributed rollout', () => {
  it('coordinator + 2 model workers + trainer finish a run with no episode lost', async () => {
    const logs = (): string => apps.map((a) => logTail(a)).join('\n');
    for (const name of ['worker-1', 'worker-2']) {
      apps.push(startApp('worker', name, [...common, '--run', runId, '--concurrency', '4', '--worker-id', name, '--model', modelDir, '--executor-pool-size', '1', '--discovery-ms', '200'], env));
    }
    apps.push(startApp('trainer', 'trainer', [...common, '--run', runId, '--model', modelDir], env));
    const coordinator = startApp(
      'coordinator',
      'coordinator',
      [
        ...common,
        '--run', runId, '--dataset', spiderDir, '--policy', 'model', '--model', modelDir,
        '--episodes', String(EPISODES), '--group-size', String(GROUP_SIZE), '--groups-per-batch', String(GROUPS_PER_BATCH),
        '--max-staleness', '1', '--drop-zero-variance', 'false',
        '--max-new-tokens', '24', '--context-tokens', '1500', '--temperature', '1', '--lora-rank', '2', '--lora-targets', 'q_proj,v_proj',
      ],
      env,
    );
    apps.push(coordinator);
    expect(await coordinator.exited, logs()).toBe(0);
    const summary = JSON.parse(coordinator.stdout().trim()) as RunSummary;
    expect(summary, logs()).toMatchObject({
      policy: 'model',
      episodes_completed: EPISODES,
      episodes_consumed: EPISODES,
      episodes_failed: 0,
      groups_failed: 0,
      duplicate_trajectories: 0,
      lost_episodes: 0,
    });

    // The trainer consumed every group and moved the policy on; its trajectories were deleted once
    // trained (run retention), so the token-level checks live in tests/llm-rollout.test.ts.
    expect(summary.policy_version, logs()).toBe(EPISODES / GROUP_SIZE / GROUPS_PER_BATCH);
    expect(await redis.keys(`${keyBase}:*${runId}*traj*`)).toEqual([]);

    // The GRPO updater trained every batch: the committed weights are a PEFT adapter of the run's
    // shape, with the optimizer state of every step stored beside it. (A random model fails every
    // episode alike, so the advantages here are 0 and the adapter need not move: that it learns is
    // tested in tests/grpo-learning.test.ts and tests/grpo-updater.test.ts.)
    const transport = new BullmqTransport({ redisUrl: REDIS_URL, keyBase });
    try {
      const counters = await transport.counters(runId);
      expect(counters.weightsKey).not.toBeNull();
      const blob = await transport.blobs.get(counters.weightsKey!);
      const adapter = decodeAdapter(presetConfig('tiny-qwen3'), blob!);
      expect(adapter.lora).toMatchObject({ rank: 2, targets: ['q_proj', 'v_proj'] });
      const optimizer = decodeOptimizerState((await transport.blobs.get(`${counters.weightsKey!}/optimizer`))!);
      expect(optimizer.step).toBe(summary.policy_version);
    } finally {
      await transport.close();
    }
  }, 240_000);
});
