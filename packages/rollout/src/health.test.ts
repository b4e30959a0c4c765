import { describe, expect, it } from 'vitest';
import { createHealthCheck } from './health.ts';

describe('createHealthCheck', () => {
  it('is ok while the ping answers and the loop turns; names the reason otherwise', async () => {
    let redisUp = true;
    const health = createHealthCheck({
      ping: () => (redisUp ? Promise.resolve() : Promise.reject(new Error('connection is reconnecting'))),
      pingTimeoutMs: 100,
      maxLoopLagMs: 150,
    });
    try {
      expect(await health.check()).toMatchObject({ ok: true, redis: 'ok' });
      redisUp = false;
      expect(await health.check()).toMatchObject({ ok: false, redis: 'unreachable', redisMs: null, reason: 'redis unreachable: connection is reconnecting' });
      redisUp = true;
      // Block the event loop well past the limit: the next check reports the stall, the one after is clean.
      const until = performance.now() + 400;
      while (performance.now() < until) {
        // busy
      }
      await new Promise((resolve) => setTimeout(resolve, 30));
      const stalled = await health.check();
      expect(stalled.ok).toBe(false);
      expect(stalled.loopLagMaxMs).toBeGreaterThan(150);
      expect(stalled.reason).toMatch(/event loop stalled for \d+ ms \(limit 150 ms\)/);
      expect(await health.check()).toMatchObject({ ok: true });
    } finally {
      health.close();
      health.close();
    }
  });
});
