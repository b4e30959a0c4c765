import { describe, expect, it } from 'vitest';
import { RolloutMetrics } from './metrics.ts';
import { startStatusServer } from './status-server.ts';

describe('startStatusServer', () => {
  it('serves Prometheus metrics, the status JSON and a health check', async () => {
    const metrics = new RolloutMetrics();
    metrics.episodesCompleted.inc({ run: 'r1' }, 3);
    metrics.observeCounters('r1', {
      admittedGroups: 5, failedGroups: 1, scoredPending: 0, trainedGroups: 3, droppedGroups: 1, policyVersion: 2, weightsKey: null,
      completedEpisodes: 18, failedEpisodes: 2, consumedEpisodes: 16, duplicateTrajectories: 0, totalGroups: 5, done: true,
      trained: { batches: 3, episodes: 12, rewardSum: 6, correct: 6 },
    });
    const server = await startStatusServer({ port: 0, host: '127.0.0.1', registry: metrics.registry, status: () => ({ app: 'test', ok: true }) });
    try {
      const base = `http://127.0.0.1:${server.port}`;
      const text = await (await fetch(`${base}/metrics`)).text();
      expect(text).toContain('sqlenv_episodes_completed_total{run="r1"} 3');
      expect(text).toContain('sqlenv_run_groups{run="r1",state="failed"} 1');
      expect(text).toContain('sqlenv_policy_version{run="r1"} 2');
      expect(await (await fetch(`${base}/status`)).json()).toEqual({ app: 'test', ok: true });
      expect((await fetch(`${base}/healthz`)).status).toBe(200);
      expect((await fetch(`${base}/nope`)).status).toBe(404);
    } finally {
      await server.close();
      await server.close();
    }
  });
});
