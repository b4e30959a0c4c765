import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { presetConfig, writeRandomCheckpoint } from '@sqlenv/model';
import { sharedAdapterDir, type RunSummary } from '@sqlenv/rollout';
import { writeTinySpider } from '@sqlenv/sql-env/testing';
import { logTail, startApp, type AppProcess, stopAppsAndDeleteKeys } from '@sqlenv/rollout/testing';
import { answeredRequests, startServeModel, type ServeModelProcess } from './serve-model-processes.ts';

/**
 * Remote sampling across processes: coordinator + 2 workers + trainer over real Redis, the workers
 * sampling from 2 `sqlenv serve-model` processes, the trainer publishing each version to the
 * adapter share. One server is killed (SIGKILL) mid-run and started again on its port, without the
 * adapters it had loaded; then the other is killed, so the rest of the run samples from the restarted
 * one, which the workers must re-prime. The run still finishes with every episode trained once.
 */
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const keyBase = `test-remote-${randomBytes(4).toString('hex')}`;
const runId = `remote-${randomBytes(3).toString('hex')}`;
const EPISODES = 32;
const root = mkdtempSync(join(tmpdir(), 'sqlenv-remote-dist-'));
const modelDir = join(root, 'tiny');
const share = join(root, 'share');
let spiderDir: string;
const redis = new Redis(REDIS_URL);
const apps: AppProcess[] = [];
const servers: ServeModelProcess[] = [];
const common = ['--redis', REDIS_URL, '--key-base', keyBase, '--poll-ms', '100'];
const env = { SQLENV_CACHE_DIR: join(root, 'cache') };
const lora = ['--lora-rank', '2', '--lora-alpha', '4', '--lora-targets', 'q_proj,v_proj'];
const serveArgs = (port: number): string[] => ['--model', modelDir, '--port', String(port), '--threads', '1', '--max-batch-size', '4', '--served-model-name', 'tiny', '--max-loras', '4', ...lora];
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  writeRandomCheckpoint(modelDir, presetConfig('tiny-qwen3'), { seed: 11, initStd: 0.1 });
  spiderDir = await writeTinySpider();
  servers.push(...(await Promise.all([startServeModel(serveArgs(0)), startServeModel(serveArgs(0))])));
}, 300_000);

afterAll(async () => {
  await stopAppsAndDeleteKeys(apps, redis, keyBase);
  await Promise.all(servers.map((s) => s.stop()));
  rmSync(root, { recursive: true, force: true });
  rmSync(spiderDir, { recursive: true, force: true });
});

describe('remote sampling in the distributed rollout', () => {
  it('2 workers on 2 servers, one killed mid-run and restarted, then the other killed: the run finishes on the re-primed server, every version in the share', async () => {
    const [a, b] = servers as [ServeModelProcess, ServeModelProcess];
    const logs = (): string => apps.map((p) => logTail(p)).join('\n');
    const remote = ['--model', modelDir, '--inference-url', `${a.url},${b.url}`, '--adapter-share', share];
    for (const name of ['worker-1', 'worker-2']) {
      apps.push(startApp('worker', name, [...common, '--run', runId, '--concurrency', '4', '--worker-id', name, '--executor-pool-size', '1', '--discovery-ms', '200', ...remote], env));
    }
    apps.push(startApp('trainer', 'trainer', [...common, '--run', runId, '--model', modelDir, '--adapter-share', share], env));
    const coordinator = startApp(
      'coordinator',
      'coordinator',
      [
        ...common,
        '--run', runId, '--dataset', spiderDir, '--policy', 'model', '--model', modelDir,
        '--episodes', String(EPISODES), '--group-size', '2', '--groups-per-batch', '2',
        '--max-staleness', '1', '--drop-zero-variance', 'false',
        '--max-new-tokens', '24', '--context-tokens', '1500', '--temperature', '1', ...lora,
      ],
      env,
    );
    apps.push(coordinator);
    let finished = false;
    void coordinator.exited.then(() => (finished = true));
    while ((await answeredRequests(a.url, '/v1/completions')) < 6 && !finished) await sleep(20);
    expect(finished, `the run ended before server A answered 6 turns\n${logs()}`).toBe(false);
    const bBefore = await answeredRequests(b.url, '/v1/completions');
    await a.stop();
    // A comes back on its port with no adapter loaded; the workers still believe it holds theirs.
    const restarted = await startServeModel(serveArgs(a.port));
    servers.push(restarted);
    // Once v1 is out, every later turn needs an adapter: the restarted server must be re-primed.
    while (!existsSync(join(sharedAdapterDir(share, runId, 1), 'adapter_config.json')) && !finished) await sleep(20);
    expect(finished, `the run ended before the restarted server was up and v1 out\n${logs()}`).toBe(false);
    while ((await answeredRequests(b.url, '/v1/completions')) <= bBefore && !finished) await sleep(20);
    await b.stop();

    expect(await coordinator.exited, logs()).toBe(0);
    const summary = JSON.parse(coordinator.stdout().trim()) as RunSummary;
    expect(summary, logs()).toMatchObject({ policy: 'model', episodes_completed: EPISODES, episodes_consumed: EPISODES, episodes_failed: 0, groups_failed: 0, duplicate_trajectories: 0, lost_episodes: 0 });
    expect(summary.policy_version).toBe(EPISODES / 4);
    expect(await answeredRequests(restarted.url, '/v1/completions'), logs()).toBeGreaterThan(0);
    expect(await answeredRequests(restarted.url, '/v1/load_lora_adapter'), logs()).toBeGreaterThan(0);
    for (let version = 1; version <= EPISODES / 4; version++) expect(existsSync(join(sharedAdapterDir(share, runId, version), 'adapter_config.json')), `v${version}`).toBe(true);
  }, 400_000);
});
