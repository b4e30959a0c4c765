import { afterAll, describe, expect, it } from 'vitest';
import { freePort, startPrivateRedis, type PrivateRedis, logTail, startApp, stopAll, waitFor, type AppProcess } from '@sqlenv/rollout/testing';

/**
 * The compose healthchecks call /healthz: it must turn 503 when the app loses Redis (and 200 again
 * when Redis is back), not keep answering 200 from a process that can do nothing. A worker process
 * (the app's real main.ts) against a Redis of the test's own, which the test kills and restarts.
 */
let redis: PrivateRedis | undefined;
const apps: AppProcess[] = [];

afterAll(async () => {
  await stopAll(apps);
  await redis?.kill();
});

async function healthz(port: number): Promise<{ status: number; body: Record<string, unknown> | string }> {
  const response = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(5_000) });
  const text = await response.text();
  try {
    return { status: response.status, body: JSON.parse(text) as Record<string, unknown> };
  } catch {
    return { status: response.status, body: text };
  }
}

describe('/healthz of a rollout app', () => {
  it('answers 503 while Redis is gone and 200 once it is back', async () => {
    redis = await startPrivateRedis();
    const port = await freePort();
    const worker = startApp('worker', 'healthz-worker', [], {
      REDIS_URL: redis.url,
      METRICS_PORT: String(port),
      SQLENV_METRICS_HOST: '127.0.0.1',
      SQLENV_DISCOVERY_MS: '200',
      SQLENV_EXECUTOR_POOL_SIZE: '1',
    });
    apps.push(worker);
    const logs = (): string => logTail(worker);
    const statusIs = (code: number) => async (): Promise<boolean> => (await healthz(port).catch(() => ({ status: 0, body: '' }))).status === code;

    await waitFor(statusIs(200), 60_000, `worker healthy\n${logs()}`);
    expect((await healthz(port)).body).toMatchObject({ ok: true, redis: 'ok' });

    await redis.kill();
    await waitFor(statusIs(503), 20_000, `worker unhealthy without Redis\n${logs()}`);
    const down = await healthz(port);
    expect(down.body).toMatchObject({ ok: false, redis: 'unreachable', redisMs: null });
    expect(String((down.body as Record<string, unknown>)['reason'])).toMatch(/redis unreachable/);

    await redis.restart();
    await waitFor(statusIs(200), 30_000, `worker healthy again\n${logs()}`);
    worker.child.kill('SIGTERM');
    expect(await worker.exited).toBe(0);
  }, 120_000);
});
