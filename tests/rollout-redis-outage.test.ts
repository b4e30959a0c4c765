import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunSummary } from '@sqlenv/rollout';
import { prepareBuiltinDataset } from '@sqlenv/sql-env/testing';
import { logTail, startApp, stopAll, waitFor, type AppProcess } from '@sqlenv/rollout/testing';

/**
 * Redis goes away mid-run: a private redis-server (nothing on disk) behind a
 * TCP proxy written here; the proxy cuts every connection and refuses new ones
 * for a few seconds. Coordinator, workers and trainer must reconnect on their
 * own and finish the run with nothing lost and nothing duplicated.
 */
const EPISODES = 120;
const OUTAGE_MS = 3_000;

let redisServer: ChildProcess | undefined;
let redisPort = 0;
const apps: AppProcess[] = [];

/** Forwards a port to Redis; `cut(ms)` drops every connection and refuses new ones for `ms`. */
class FlakyProxy {
  #server: Server | undefined;
  readonly #sockets = new Set<Socket>();
  port = 0;
  dropped = 0;

  async start(targetPort: number, port = 0): Promise<void> {
    const server = createServer((client) => {
      const upstream = connect(targetPort, '127.0.0.1');
      this.#sockets.add(client);
      this.#sockets.add(upstream);
      client.pipe(upstream);
      upstream.pipe(client);
      const close = (): void => {
        client.destroy();
        upstream.destroy();
        this.#sockets.delete(client);
        this.#sockets.delete(upstream);
      };
      client.on('error', close);
      upstream.on('error', close);
      client.on('close', close);
      upstream.on('close', close);
    });
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    this.port = (server.address() as { port: number }).port;
    this.#server = server;
  }

  async cut(ms: number, targetPort: number): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    this.dropped += this.#sockets.size;
    for (const socket of this.#sockets) socket.destroy();
    this.#sockets.clear();
    await new Promise<void>((resolve) => server?.close(() => resolve()) ?? resolve());
    await new Promise((resolve) => setTimeout(resolve, ms));
    await this.start(targetPort, this.port);
  }

  close(): void {
    for (const socket of this.#sockets) socket.destroy();
    this.#server?.close();
  }
}

const proxy = new FlakyProxy();

beforeAll(async () => {
  await prepareBuiltinDataset();
  redisPort = 20_000 + Math.floor(Math.random() * 20_000);
  redisServer = spawn('redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  const probe = new Redis(redisPort, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => 100 });
  probe.on('error', () => undefined); // refused until the server is up: expected
  await waitFor(
    async () => {
      try {
        if (probe.status !== 'ready') await probe.connect().catch(() => undefined);
        return (await probe.ping()) === 'PONG';
      } catch {
        return false;
      }
    },
    10_000,
    'private redis-server',
  );
  probe.disconnect();
  await proxy.start(redisPort);
}, 120_000);

afterAll(async () => {
  await stopAll(apps);
  proxy.close();
  redisServer?.kill('SIGTERM');
});

describe('distributed rollout through a Redis outage', () => {
  it('reconnects every app and completes the run', async () => {
    const url = `redis://127.0.0.1:${proxy.port}`;
    const runId = `outage-${randomBytes(3).toString('hex')}`;
    const common = ['--redis', url, '--key-base', 'outage', '--lock-duration-ms', '3000', '--stalled-interval-ms', '1000', '--poll-ms', '100'];
    const trainer = startApp('trainer', 'outage-trainer', [...common, '--run', runId], {});
    const workers = [1, 2].map((i) => startApp('worker', `outage-worker-${i}`, [...common, '--run', runId, '--concurrency', '8', '--executor-pool-size', '1', '--discovery-ms', '200'], {}));
    const coordinator = startApp(
      'coordinator',
      'outage-coordinator',
      [...common, '--run', runId, '--policy', 'oracle', '--episodes', String(EPISODES), '--group-size', '4', '--groups-per-batch', '2', '--max-staleness', '1', '--drop-zero-variance', 'false'],
      {},
    );
    apps.push(trainer, ...workers, coordinator);
    const logs = (): string => apps.map((a) => logTail(a)).join('\n');

    // Watch Redis directly (not through the proxy).
    const direct = new Redis(redisPort, '127.0.0.1');
    try {
      const stateKey = `outage:{${runId}}:state`;
      await waitFor(async () => Number((await direct.hget(stateKey, 'version')) ?? 0) >= 2, 90_000, `run progress\n${logs()}`);
      const before = await direct.hgetall(stateKey);
      expect(before['done']).toBeUndefined();
      await proxy.cut(OUTAGE_MS, redisPort);
      expect(proxy.dropped).toBeGreaterThanOrEqual(5);

      const code = await coordinator.exited;
      expect(code, logs()).toBe(0);
      const summary = JSON.parse(coordinator.stdout().trim()) as RunSummary;
      expect(summary).toMatchObject({ episodes_completed: EPISODES, episodes_consumed: EPISODES, lost_episodes: 0, duplicate_trajectories: 0, groups_failed: 0 });
      expect(Number(before['version'])).toBeLessThan(summary.policy_version);
      expect(await direct.bitcount(`outage:{${runId}}:trained-episodes`)).toBe(EPISODES);
      expect(await trainer.exited).toBe(0);
    } finally {
      direct.disconnect();
    }
  }, 150_000);
});
