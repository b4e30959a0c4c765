import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { AppError, ErrorCode } from '@sqlenv/shared';
import { createSqlEnvRuntime } from './runtime.ts';
import { writeTinySpider } from './testing/tiny-spider.ts';

let cacheDir: string;
beforeAll(async () => {
  cacheDir = await mkdtemp(join(tmpdir(), 'sqlenv-runtime-'));
});
afterAll(async () => {
  await rm(cacheDir, { recursive: true, force: true });
});

describe('createSqlEnvRuntime', () => {
  it('plays the builtin dataset end to end with the gold answer', async () => {
    const runtime = await createSqlEnvRuntime({ dataset: 'builtin', cacheDir, executor: { poolSize: 2 }, env: { stepBudget: 10 } });
    try {
      expect(runtime.config.stepBudget).toBe(10);
      const question = runtime.dataset.questions[0];
      if (question === undefined) throw new Error('empty builtin dataset');
      const env = runtime.createEnvironment();
      const reset = await env.reset({ question_id: question.question_id });
      expect(reset.observation.budget_remaining).toBe(10);
      for (const table of question.tables_involved) expect((await env.step({ action_type: 'DESCRIBE', argument: table })).observation.error).toBe('');
      const query = await env.step({ action_type: 'QUERY', argument: question.gold_sql });
      expect(query.observation.error).toBe('');
      const answer = await env.step({ action_type: 'ANSWER', argument: question.gold_answer });
      expect(answer.info.correct).toBe(true);
      expect(env.state().total_reward).toBeGreaterThan(1);
    } finally {
      await runtime.close();
      await runtime.close();
    }
  });

  it('gives an environment its own reward settings when asked, and refuses bad ones', async () => {
    const runtime = await createSqlEnvRuntime({ dataset: 'builtin', cacheDir, executor: { poolSize: 2 } });
    try {
      const question = runtime.dataset.questions.find((q) => q.answer_type === 'string');
      if (question === undefined) throw new Error('no string question in the builtin dataset');
      const near = `${question.gold_answer}x`;
      const play = async (env: ReturnType<typeof runtime.createEnvironment>): Promise<number> => {
        await env.reset({ question_id: question.question_id });
        const step = await env.step({ action_type: 'ANSWER', argument: near });
        expect(step.info.correct).toBe(false);
        return step.info.reward_breakdown.terminal;
      };
      expect(await play(runtime.createEnvironment())).toBe(0);
      const credited = await play(runtime.createEnvironment({ answerSimilarityScale: 0.5 }));
      expect(credited).toBeGreaterThan(0.3);
      expect(credited).toBeLessThan(0.5);
      expect(runtime.config.reward.answerSimilarityScale).toBe(0); // the runtime's own config is untouched
      expect(() => runtime.createEnvironment({ answerSimilarityScale: 2 })).toThrow(/answerSimilarityScale/);
    } finally {
      await runtime.close();
    }
  });

  it('shares one SAMPLE cache across its environments', async () => {
    const dir = await writeTinySpider();
    const runtime = await createSqlEnvRuntime({ dataset: dir, cacheDir, executor: { poolSize: 2 } });
    try {
      const [a, b] = [runtime.createEnvironment(), runtime.createEnvironment()];
      await a.reset({ question_id: 'shop_train_0' });
      await b.reset({ question_id: 'shop_train_1' });
      const queries = vi.spyOn(runtime.executor, 'query');
      const first = await a.step({ action_type: 'SAMPLE', argument: 'singer' });
      expect(queries).toHaveBeenCalledTimes(1);
      const second = await b.step({ action_type: 'SAMPLE', argument: 'Singer' });
      expect(queries).toHaveBeenCalledTimes(1);
      expect(second.observation.result).toBe(first.observation.result);
      await b.step({ action_type: 'SAMPLE', argument: 'select' });
      expect(queries).toHaveBeenCalledTimes(2);
    } finally {
      await runtime.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('fails fast on bad config and bad datasets', async () => {
    const badConfig = await createSqlEnvRuntime({ dataset: 'builtin', cacheDir, env: { resultMaxRows: 0 } }).catch((e: unknown) => e);
    expect(badConfig).toBeInstanceOf(AppError);
    expect((badConfig as AppError).code).toBe(ErrorCode.VALIDATION);
    expect((badConfig as AppError).message).toMatch(/resultMaxRows/);
    const badDir = await createSqlEnvRuntime({ dataset: join(cacheDir, 'missing'), cacheDir, executor: { poolSize: 1 } }).catch((e: unknown) => e);
    expect((badDir as AppError).code).toBe(ErrorCode.DATASET);
  });
});
