import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { RolloutRunSpecSchema } from '@sqlenv/protocol';
import { readRunMetrics, readSavedEvals, REPORT_FILE } from '@sqlenv/runs';
import { silentLogger } from '@sqlenv/shared';
import { runTraining } from './training-run.ts';

const scratch = mkdtempSync(join(tmpdir(), 'sqlenv-training-run-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('runTraining: a whole training run as one library call', () => {
  it('trains the run to the end, evaluates before and after, and leaves its run directory', async () => {
    const spec = RolloutRunSpecSchema.parse({ run_id: 'training-run-test', policy: 'random', episodes: 16, group_size: 4, groups_per_batch: 2, seed: 3 });
    const runDir = join(scratch, 'run');
    const run = await runTraining(spec, {
      runDir,
      saveEvery: 0,
      keepWeights: 2,
      concurrency: 4,
      localWorker: true,
      heldOut: { episodes: 3, split: 'dev', seed: 0, seeds: 1, temperature: 0 },
      runtime: { logger: silentLogger },
      logger: silentLogger,
    });
    expect(run.summary).toMatchObject({ run_id: 'training-run-test', episodes_completed: 16, lost_episodes: 0 });
    expect(run.evals.map((e) => [e.name, e.version, e.episodes_count])).toEqual([
      ['before', 0, 3],
      ['after', run.summary.policy_version, 3],
    ]);
    expect(run.report).toBe(join(runDir, REPORT_FILE));
    expect(existsSync(run.report)).toBe(true);
    expect(readRunMetrics(runDir).map((l) => l.version)).toEqual(run.batches.map((b) => b.version));
    expect(readSavedEvals(runDir).map((e) => e.name)).toEqual(['before', 'after']);
  }, 120_000);

  it('refuses a run with no worker anywhere before opening anything', async () => {
    const spec = RolloutRunSpecSchema.parse({ run_id: 'no-worker', policy: 'random', episodes: 4, group_size: 4 });
    const runDir = join(scratch, 'no-worker');
    await expect(runTraining(spec, { runDir, saveEvery: 0, keepWeights: 1, concurrency: 1, localWorker: false, runtime: {}, logger: silentLogger })).rejects.toThrow(/--local-worker false needs --redis/);
    expect(existsSync(runDir)).toBe(false);
  });
});
