import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeAdapter, presetConfig, writeRandomCheckpoint } from '@sqlenv/model';
import type { RunSummary } from '@sqlenv/rollout';
import { trainCommand } from '@sqlenv/cli';
import { readRunMetrics } from '@sqlenv/runs';
import { logTail, startApp, stopAll, type AppProcess, deleteKeysUnder } from '@sqlenv/rollout/testing';

/**
 * The result of a model run must not depend on the transport: with max_staleness 0 and the same
 * seed, the embedded run (in-process transport, one process) and the distributed one (coordinator,
 * worker and GRPO trainer as separate processes over Redis and BullMQ) play the same episodes with
 * the same adapters and train the same adapter, byte for byte. A staleness-0 run of the asynchronous
 * path that drifted from the synchronous one is a known bug class of RL systems.
 */
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const keyBase = `test-parity-${randomBytes(4).toString('hex')}`;
const runId = `parity-${randomBytes(3).toString('hex')}`;
const root = mkdtempSync(join(tmpdir(), 'sqlenv-parity-'));
const modelDir = join(root, 'tiny');
const env = { SQLENV_CACHE_DIR: join(root, 'cache') };
const apps: AppProcess[] = [];
// A random tiny model at a high temperature: episodes end at different turns, so groups have reward
// variance and the adapter moves (the comparison would be empty otherwise; asserted below).
const spec = [
  '--run', runId, '--dataset', 'builtin', '--policy', 'model', '--model', modelDir,
  '--episodes', '16', '--group-size', '4', '--groups-per-batch', '2', '--max-staleness', '0', '--seed', '3',
  '--max-new-tokens', '32', '--context-tokens', '1800', '--temperature', '1.5', '--lr', '0.01',
];

beforeAll(() => {
  writeRandomCheckpoint(modelDir, presetConfig('tiny-qwen3'), { seed: 0 });
});

afterAll(async () => {
  await stopAll(apps);
  const redis = new Redis(REDIS_URL);
  await deleteKeysUnder(redis, keyBase);
  await deleteKeysUnder(redis, `${keyBase}-train`);
  await redis.quit();
  rmSync(root, { recursive: true, force: true });
});

/** Redis options of the distributed apps under a key base. */
const redisOptions = (base: string): string[] => ['--redis', REDIS_URL, '--key-base', base, '--poll-ms', '100'];

/** A rollout worker process of the run over Redis under `base`. */
function startWorker(name: string, base: string): AppProcess {
  return startApp('worker', name, [...redisOptions(base), '--run', runId, '--concurrency', '1', '--model', modelDir, '--executor-pool-size', '1', '--discovery-ms', '200'], env);
}

function sink(): Writable & { text: () => string } {
  const chunks: string[] = [];
  const stream = new Writable({ write: (chunk, _enc, done) => (chunks.push(String(chunk)), done()) });
  return Object.assign(stream, { text: () => chunks.join('') });
}

describe('transport parity', () => {
  it('seeded runs at max_staleness 0 train the same adapter embedded and over Redis', async () => {
    const embeddedDir = join(root, 'embedded');
    const stdout = sink();
    const stderr = sink();
    const code = await trainCommand([...spec, '--concurrency', '1', '--run-dir', embeddedDir, '--json', '--log-level', 'silent'], { stdout, stderr, env });
    expect(code, stderr.text()).toBe(0);
    const embedded = JSON.parse(stdout.text().trim().split('\n').at(-1) ?? '{}') as RunSummary;
    expect(embedded).toMatchObject({ policy_version: 2, episodes_consumed: 16, lost_episodes: 0 });

    const distributedDir = join(root, 'distributed');
    const common = redisOptions(keyBase);
    apps.push(startWorker('parity-worker', keyBase));
    const trainer = startApp('trainer', 'parity-trainer', [...common, '--run', runId, '--model', modelDir, '--run-dir', distributedDir], env);
    apps.push(trainer);
    const coordinator = startApp('coordinator', 'parity-coordinator', [...common, ...spec], env);
    apps.push(coordinator);
    const logs = (): string => apps.map((a) => logTail(a)).join('\n');
    expect(await coordinator.exited, logs()).toBe(0);
    const distributed = JSON.parse(coordinator.stdout().trim()) as RunSummary;
    expect(distributed, logs()).toMatchObject({ transport: 'bullmq', policy_version: 2, episodes_consumed: 16, lost_episodes: 0 });
    // With --run the trainer exits once the run is done, after writing its run directory.
    expect(await trainer.exited, logs()).toBe(0);
    expect(distributed.reward_mean).toBeCloseTo(embedded.reward_mean ?? Number.NaN, 12); // summed in another order

    // The learner saw the same batches: the same losses and gradient norms, version by version.
    const learnerNumbers = (dir: string): unknown[] => readRunMetrics(dir).map((m) => [m.version, m.reward_mean, m.loss, m.grad_norm]);
    expect(learnerNumbers(distributedDir)).toEqual(learnerNumbers(embeddedDir));
    // The final adapter, byte for byte; and it did move away from the base policy (B starts at 0).
    const adapterFile = (dir: string): Buffer => readFileSync(join(dir, 'adapters', 'v2', 'adapter_model.safetensors'));
    expect(Buffer.compare(adapterFile(distributedDir), adapterFile(embeddedDir))).toBe(0);
    const adapter = decodeAdapter(presetConfig('tiny-qwen3'), adapterFile(embeddedDir));
    expect([...adapter.weights].some(([name, values]) => name.includes('lora_B') && values.some((v) => v !== 0))).toBe(true);

    // `sqlenv train --redis URL --local-worker false` (what `sqlenv learn --redis URL` runs): the same
    // process coordinates and trains over Redis while an external worker plays; the same adapter again.
    const trainRedisDir = join(root, 'train-redis');
    const keyBase2 = `${keyBase}-train`;
    apps.push(startWorker('parity-worker-2', keyBase2));
    const out2 = sink();
    const err2 = sink();
    const code2 = await trainCommand([...spec, '--redis', REDIS_URL, '--key-base', keyBase2, '--local-worker', 'false', '--concurrency', '1', '--run-dir', trainRedisDir, '--json', '--log-level', 'silent'], { stdout: out2, stderr: err2, env });
    expect(code2, `${err2.text()}\n${logs()}`).toBe(0);
    expect(JSON.parse(out2.text().trim().split('\n').at(-1) ?? '{}')).toMatchObject({ transport: 'bullmq', policy_version: 2, episodes_consumed: 16, lost_episodes: 0 });
    expect(learnerNumbers(trainRedisDir)).toEqual(learnerNumbers(embeddedDir));
    expect(Buffer.compare(adapterFile(trainRedisDir), adapterFile(embeddedDir))).toBe(0);
  }, 300_000);

  it('refuses --local-worker false without Redis (nothing would play the episodes)', async () => {
    const stderr = sink();
    const code = await trainCommand(['--local-worker', 'false', '--episodes', '4', '--log-level', 'silent'], { stdout: sink(), stderr, env });
    expect(code).toBe(2);
    expect(stderr.text()).toContain('--local-worker false needs --redis URL');
  });
});
