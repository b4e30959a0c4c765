import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { evaluate, OraclePolicy, RandomPolicy } from '@sqlenv/agents';
import { createSqlEnvRuntime, type SqlEnvRuntime } from '@sqlenv/sql-env';

/**
 * The "must show" for the environment: the oracle solves (almost)
 * every question and the random policy (almost) none, on the built-in dataset
 * and, when SPIDER_DIR is set, on every playable question of the shared Spider
 * subset. Oracle failures are listed with their reasons in the assertion.
 */
const sources: Array<{ name: string; dataset: string }> = [{ name: 'builtin', dataset: 'builtin' }];
if (process.env['SPIDER_DIR']) sources.push({ name: 'spider', dataset: process.env['SPIDER_DIR'] });

describe.each(sources)('baseline policies on $name', ({ dataset }) => {
  let runtime: SqlEnvRuntime;
  beforeAll(async () => {
    runtime = await createSqlEnvRuntime({ dataset, cacheDir: path.join(os.tmpdir(), 'sqlenv-test-cache') });
  }, 120_000);
  afterAll(async () => {
    await runtime.close();
  });

  it('the oracle answers ≥ 99 % of all questions with reward ≈ 1.1–1.3', async () => {
    const questionIds = runtime.dataset.questions.map((q) => q.question_id);
    const report = await evaluate(() => runtime.createEnvironment(), new OraclePolicy(runtime.dataset), { questionIds, concurrency: 16 });
    const failures = report.records.filter((r) => !r.success).map((r) => `${r.question_id}: ${r.error ?? r.done_reason}`);
    expect(report.episodes).toBe(questionIds.length);
    expect(report.success_rate, failures.slice(0, 20).join('\n')).toBeGreaterThanOrEqual(0.99);
    expect(report.mean_reward).toBeGreaterThan(1.1);
    expect(report.mean_reward).toBeLessThan(1.3);
    expect(report.errors).toBe(0);
  }, 300_000);

  it('the random policy almost never answers correctly', async () => {
    const report = await evaluate(() => runtime.createEnvironment(), new RandomPolicy({ seed: 1 }), { episodes: 300, seed: 5, concurrency: 16 });
    expect(report.episodes).toBe(300);
    expect(report.errors).toBe(0);
    expect(report.success_rate).toBeLessThan(0.03);
    expect(report.mean_reward).toBeLessThan(0.3);
    expect(report.mean_steps).toBeGreaterThan(1);
  }, 300_000);
});
