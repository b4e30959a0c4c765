import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { RolloutRunSpecSchema } from '@sqlenv/protocol';
import { BullmqTransport, RolloutWorker, runCoordinator } from '@sqlenv/rollout';
import { trainerCommand } from '@sqlenv/cli';
import { readRunMetrics } from '@sqlenv/runs';
import { TOY_QUESTIONS, ToyPolicy, toyEnvironments, deleteKeysUnder } from '@sqlenv/rollout/testing';

/**
 * `sqlenv trainer --run-dir`: the distributed trainer (over Redis, BullMQ) leaves the same run
 * directory as `sqlenv train`: a metrics line per version, the spec, and report.html.
 */
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const keyBase = `test-${randomBytes(4).toString('hex')}`;
const scratch = mkdtempSync(join(tmpdir(), 'sqlenv-run-dir-redis-'));

afterAll(async () => {
  rmSync(scratch, { recursive: true, force: true });
  const redis = new Redis(REDIS_URL);
  await deleteKeysUnder(redis, keyBase);
  await redis.quit();
});

describe('sqlenv trainer --run-dir', () => {
  it('writes metrics.jsonl, run.json and report.html for the run it trains', async () => {
    const runId = `rundir-${randomBytes(2).toString('hex')}`;
    const runDir = join(scratch, 'runs');
    let out = '';
    let err = '';
    const stdout = new Writable({ write: (chunk: Buffer, _e, done) => ((out += chunk.toString()), done()) });
    const stderr = new Writable({ write: (chunk: Buffer, _e, done) => ((err += chunk.toString()), done()) });
    const trainer = trainerCommand(['--redis', REDIS_URL, '--key-base', keyBase, '--run', runId, '--run-dir', runDir, '--poll-ms', '50', '--log-level', 'silent', '--run-retention-s', '0'], { stdout, stderr, env: {} });
    const transport = new BullmqTransport({ redisUrl: REDIS_URL, keyBase });
    const worker = new RolloutWorker({ transport, resolveRun: () => Promise.resolve({ policy: new ToyPolicy(), environments: toyEnvironments() }), concurrency: 4, runId, workerId: 'w', discoveryMs: 50 });
    try {
      await worker.start();
      const spec = RolloutRunSpecSchema.parse({ run_id: runId, policy: 'toy', episodes: 32, group_size: 2, groups_per_batch: 2, max_staleness: 1, drop_zero_variance: false });
      const summary = await runCoordinator({ transport, spec, questions: TOY_QUESTIONS, pollMs: 50 });
      expect(await trainer, err).toBe(0);
      const line = JSON.parse(out.trim()) as { run_id: string; finished: boolean; run_dir: string; report: string };
      expect(line).toMatchObject({ run_id: runId, finished: true, run_dir: runDir, report: join(runDir, 'report.html') });
      expect(readRunMetrics(runDir).map((m) => m.version)).toEqual(Array.from({ length: summary.policy_version }, (_, i) => i + 1));
      expect(JSON.parse(readFileSync(join(runDir, 'run.json'), 'utf8'))).toMatchObject({ run_id: runId, episodes: 32 });
      expect(readFileSync(join(runDir, 'report.html'), 'utf8')).toContain('data-chart="reward"');
      // The statistics-only updater publishes no adapter.
      expect(existsSync(join(runDir, 'adapters'))).toBe(false);
    } finally {
      await worker.close();
      await transport.close();
    }
  }, 60_000);
});
