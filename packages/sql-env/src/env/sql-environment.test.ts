import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_ARGUMENT_CHARS, type SqlAction, type SqlObservation, type StepOutcome } from '@sqlenv/protocol';
import { AppError, ErrorCode } from '@sqlenv/shared';
import { SqlExecutor } from '../sandbox/index.ts';
import type { Dataset } from '../dataset/dataset.ts';
import { loadDataset } from '../dataset/load-dataset.ts';
import { writeTinySpider } from '../testing/tiny-spider.ts';
import { SampleCache } from './sample-cache.ts';
import { SqlEnvironment } from './sql-environment.ts';

let executor: SqlExecutor;
let dataset: Dataset;
let dir: string;

beforeAll(async () => {
  executor = new SqlExecutor({ poolSize: 2 });
  dir = await writeTinySpider();
  dataset = await loadDataset(dir, { executor, cacheDir: join(tmpdir(), 'sqlenv-env-test-cache') });
});
afterAll(async () => {
  await executor.close();
  await rm(dir, { recursive: true, force: true });
});

const env = (config: ConstructorParameters<typeof SqlEnvironment>[0]['config'] = {}): SqlEnvironment => new SqlEnvironment({ dataset, executor, config });
const act = (action_type: SqlAction['action_type'], argument: string): SqlAction => ({ action_type, argument });

async function expectCode(promise: Promise<unknown> | (() => unknown), code: ErrorCode): Promise<AppError> {
  const error = typeof promise === 'function'
    ? await Promise.resolve().then(promise).then(() => undefined, (e: unknown) => e)
    : await promise.then(() => undefined, (e: unknown) => e);
  expect(error).toBeInstanceOf(AppError);
  expect((error as AppError).code).toBe(code);
  return error as AppError;
}

describe('reset', () => {
  it('shows the question and the table names only', async () => {
    const e = env();
    const { observation, reward, done } = await e.reset({ question_id: 'shop_train_0', episode_id: 'ep-1' });
    expect(reward).toBeNull();
    expect(done).toBe(false);
    expect(observation).toEqual({
      question: 'How many singers are there?',
      schema_info: 'Tables:\n- singer\n- Order Items\n- select\n- MixedCase',
      result: '',
      error: '',
      step_count: 0,
      budget_remaining: 15,
      action_history: [],
    });
    expect(e.state()).toEqual({ episode_id: 'ep-1', step_count: 0, question_id: 'shop_train_0', db_id: 'shop', budget_remaining: 15, done: false, total_reward: 0 });
  });

  it('picks the same question for the same seed, and spreads seeds over the pool', async () => {
    const picks = async (seed: number): Promise<string | null> => {
      const e = env();
      await e.reset({ seed });
      return e.state().question_id;
    };
    for (const seed of [0, 1, 7, 123456]) expect(await picks(seed)).toBe(await picks(seed));
    const seen = new Set<string | null>();
    for (let seed = 0; seed < 40; seed += 1) seen.add(await picks(seed));
    expect(seen.size).toBe(6); // every playable train question of the tiny dataset
    expect([...seen].every((id) => id?.includes('_train_'))).toBe(true);
  });

  it('filters by split and database, and rejects what does not exist', async () => {
    const e = env();
    await e.reset({ split: 'dev', seed: 3 });
    expect(e.state().question_id).toBe('music_dev_0');
    await e.reset({ db_id: 'shop', seed: 3 });
    expect(e.state().db_id).toBe('shop');
    await expectCode(() => e.reset({ question_id: 'shop_train_4' }), ErrorCode.NOT_FOUND); // gold SQL fails: not playable
    await expectCode(() => e.reset({ db_id: 'ghost' }), ErrorCode.NOT_FOUND);
    await expectCode(() => e.reset({ db_id: 'music' }), ErrorCode.NOT_FOUND); // music only has dev questions
    await expectCode(() => e.reset({ seed: -1 }), ErrorCode.VALIDATION);
  });
});

describe('step', () => {
  it('DESCRIBE shows columns, types and row count and adds them to schema_info', async () => {
    const e = env();
    await e.reset({ question_id: 'shop_train_2' });
    const out = await e.step(act('DESCRIBE', '"order items"'));
    expect(out.observation.error).toBe('');
    expect(out.observation.result).toBe('Table Order Items: 3 rows, 3 columns\ncolumn | type | primary_key\nitem_id | INTEGER | yes\nselect | TEXT | no\nqty | INTEGER | no\n(3 rows)');
    expect(out.observation.schema_info).toContain('- Order Items (3 rows): item_id INTEGER PK, select TEXT, qty INTEGER');
    expect(out.observation.schema_info).toContain('\n- singer\n');
    expect(out.observation.action_history).toEqual(['DESCRIBE "order items" -> ok']);
    expect(out.info.executed).toBe(true);
    expect(out.reward).toBeCloseTo(0.01);
    expect(out.info.reward_breakdown.total).toBe(out.reward);
  });

  it('SAMPLE shows 5 rows of tables whose names need quoting, in any spelling', async () => {
    const e = env();
    await e.reset({ question_id: 'shop_train_0' });
    const singers = await e.step(act('SAMPLE', 'SINGER'));
    expect(singers.observation.result.split('\n')).toEqual([
      'id | name | age | country', '1 | Singer 01 | 19 | Japan', '2 | Singer 02 | 20 | Peru', '3 | Singer 03 | 21 | France',
      '4 | Singer 04 | 22 | Japan', '5 | Singer 05 | 23 | Peru', '(5 rows)',
    ]);
    expect((await e.step(act('SAMPLE', '[select]'))).observation.result).toBe('x\n7\n8\n(2 rows)');
    expect((await e.step(act('SAMPLE', 'mixedcase'))).observation.error).toBe('');
    expect((await e.step(act('DESCRIBE', '`select`'))).observation.result).toContain('x | INTEGER | no');
  });

  it('QUERY shows 20 rows with the total, and caps the text at 2,000 characters', async () => {
    const e = env();
    await e.reset({ question_id: 'shop_train_0' });
    const all = await e.step(act('QUERY', 'SELECT id, name FROM singer ORDER BY id'));
    const lines = all.observation.result.split('\n');
    expect(lines).toHaveLength(22);
    expect(lines[0]).toBe('id | name');
    expect(lines[20]).toBe('20 | Singer 20');
    expect(lines[21]).toBe('(showing 20 of 50 rows)');
    expect(all.observation.action_history.at(-1)).toBe('QUERY SELECT id, name FROM singer ORDER BY id -> 50 rows');

    const wide = await e.step(act('QUERY', 'SELECT * FROM MixedCase'));
    expect(wide.observation.result.length).toBeLessThanOrEqual(2000);
    expect(wide.observation.result).toMatch(/output cut to 2000 characters\) \(10 rows\)$/);

    const quoted = await e.step(act('QUERY', 'SELECT "select", qty FROM "Order Items" ORDER BY qty DESC'));
    expect(quoted.observation.result).toBe('select | qty\nflute | 3\nguitar | 2\ndrum | 1\n(3 rows)');
  });

  it('accepts Spider-style double-quoted strings unless configured to reject them', async () => {
    const sql = 'SELECT count(*) FROM singer WHERE country = "France"';
    const accepting = env();
    await accepting.reset({ question_id: 'shop_train_0' });
    const accepted = await accepting.step(act('QUERY', sql));
    expect(accepted.observation.result).toBe('count(*)\n16\n(1 row)');
    expect(accepted.observation.action_history).toEqual([`QUERY ${sql} -> 1 row`]);
    const rejecting = env({ doubleQuotedStrings: 'reject' });
    await rejecting.reset({ question_id: 'shop_train_0' });
    expect((await rejecting.step(act('QUERY', sql))).observation.error).toMatch(/no such column: "France"/);
  });

  it('turns agent mistakes into error observations with a penalty', async () => {
    const e = env();
    await e.reset({ question_id: 'shop_train_0' });
    const unknown = await e.step(act('DESCRIBE', 'singers'));
    expect(unknown.observation.error).toBe("Unknown table 'singers'. Available tables: singer, Order Items, select, MixedCase");
    expect(unknown.observation.result).toBe('');
    expect(unknown.reward).toBeLessThan(0);
    expect(unknown.info.executed).toBe(false);
    expect((await e.step(act('SAMPLE', 'nope'))).observation.error).toMatch(/^Unknown table 'nope'/);

    const badColumn = await e.step(act('QUERY', 'SELECT salary FROM singer'));
    expect(badColumn.observation.error).toMatch(/no such column: salary/);
    expect(badColumn.observation.action_history.at(-1)).toMatch(/^QUERY SELECT salary FROM singer -> error: .*no such column: salary/);

    const write = await e.step(act('QUERY', 'DELETE FROM singer'));
    expect(write.observation.error).not.toBe('');
    expect(write.reward).toBeLessThan(0);
    expect((await e.step(act('QUERY', '   '))).observation.error).toMatch(/needs an SQL/);
    expect(e.state().done).toBe(false);
    expect(e.state().step_count).toBe(5);
  });

  it('ANSWER ends the episode with the terminal reward; a step after done is an EPISODE_STATE error', async () => {
    const e = env();
    await e.reset({ question_id: 'shop_train_1' });
    await e.step(act('QUERY', 'select name from singer where age > 60 order by name'));
    const answer = await e.step(act('ANSWER', 'Singer 50, Singer 49, Singer 48, Singer 47, Singer 46, Singer 45, Singer 44, Singer 43'));
    expect(answer.done).toBe(true);
    expect(answer.info).toMatchObject({ correct: true, done_reason: 'answered', executed: true });
    expect(answer.info.reward_breakdown.terminal).toBe(1);
    expect(answer.observation.action_history.at(-1)).toMatch(/^ANSWER Singer 50, .* -> submitted$/);
    expect(e.state()).toMatchObject({ done: true, step_count: 2, budget_remaining: 13 });
    expect(e.state().total_reward).toBeGreaterThan(1);
    await expectCode(e.step(act('DESCRIBE', 'singer')), ErrorCode.EPISODE_STATE);

    await e.reset({ question_id: 'shop_train_0' });
    const wrong = await e.step(act('ANSWER', '49'));
    expect(wrong.info).toMatchObject({ correct: false, done_reason: 'answered' });
    expect(wrong.reward).toBe(0);
  });

  it('ends the episode with terminal 0 when the budget runs out', async () => {
    const e = env({ stepBudget: 3 });
    await e.reset({ question_id: 'shop_train_0' });
    expect((await e.step(act('DESCRIBE', 'singer'))).observation.budget_remaining).toBe(2);
    expect((await e.step(act('SAMPLE', 'singer'))).done).toBe(false);
    const last = await e.step(act('QUERY', 'SELECT count(*) FROM singer'));
    expect(last.done).toBe(true);
    expect(last.observation.budget_remaining).toBe(0);
    expect(last.info).toMatchObject({ done_reason: 'budget_exhausted', correct: false });
    expect(last.info.reward_breakdown.terminal).toBe(0);
    expect(last.observation.result).toContain('50');
    await expectCode(e.step(act('ANSWER', '50')), ErrorCode.EPISODE_STATE);
  });

  it('turns a PARSE_ERROR action into an error observation, the format penalty and one step of the budget', async () => {
    const e = env({ stepBudget: 2, reward: { formatPenalty: 0.25 } });
    await e.reset({ question_id: 'shop_train_0' });
    const first = await e.step(act('PARSE_ERROR', 'no <tool_call> found'));
    expect(first.done).toBe(false);
    expect(first.reward).toBe(-0.25);
    expect(first.observation).toMatchObject({ error: 'no <tool_call> found', result: '', budget_remaining: 1, step_count: 1 });
    expect(first.observation.action_history).toEqual(['PARSE_ERROR no <tool_call> found -> rejected']);
    expect(first.info).toMatchObject({ executed: false });
    expect(first.info.reward_breakdown).toMatchObject({ operational: -0.25, dense: -0.25, terminal: 0, total: -0.25 });
    // The last step of the budget: the penalty plus terminal 0, budget exhausted.
    const last = await e.step(act('PARSE_ERROR', ''));
    expect(last.observation.error).toBe('the output held no valid action');
    expect(last).toMatchObject({ done: true, reward: -0.25, info: { done_reason: 'budget_exhausted', correct: false } });
    expect(e.state().total_reward).toBe(-0.5);
    // Default: 0.1, the same as the dense clip floor.
    const d = env();
    await d.reset({ question_id: 'shop_train_0' });
    expect((await d.step(act('PARSE_ERROR', 'x'))).reward).toBe(-0.1);
  });

  it('answers an argument over MAX_ARGUMENT_CHARS with an error observation, charged as a format error', async () => {
    const e = env({ reward: { formatPenalty: 0.25 } });
    for (const actionType of ['DESCRIBE', 'SAMPLE', 'QUERY', 'ANSWER', 'PARSE_ERROR'] as const) {
      await e.reset({ question_id: 'shop_train_0' });
      const argument = `SELECT 1 ${'x'.repeat(MAX_ARGUMENT_CHARS)}`;
      const outcome = await e.step(act(actionType, argument));
      expect(outcome.done).toBe(false);
      expect(outcome.reward).toBe(-0.25);
      expect(outcome.observation).toMatchObject({ result: '', step_count: 1, budget_remaining: 14 });
      expect(outcome.observation.error).toBe(`the ${actionType} argument is ${argument.length} characters long; the limit is ${MAX_ARGUMENT_CHARS}, so it was not acted on`);
      expect(outcome.observation.action_history[0]).toMatch(new RegExp(`^${actionType} SELECT 1 x+\\.\\.\\. -> rejected: argument too long$`));
      expect(outcome.info).toMatchObject({ executed: false });
      // At the limit, the argument is acted on as usual.
      await e.reset({ question_id: 'shop_train_0' });
      const atLimit = await e.step(act(actionType, 'singer'.padEnd(MAX_ARGUMENT_CHARS, ' ')));
      expect(atLimit.observation.error).not.toMatch(/not acted on/);
    }
  });

  it('judges float answers with the configured floatMatch (relative by default)', async () => {
    const question = dataset.questions.find((q) => q.answer_type === 'float');
    if (question === undefined) throw new Error('the fixture has no float question');
    const gold = question.gold_rows[0]?.[0] as number;
    const nearby = String(gold * 1.005);
    const verdict = async (config: Parameters<typeof env>[0], answer: string): Promise<boolean | undefined> => {
      const e = env(config);
      await e.reset({ question_id: question.question_id });
      return (await e.step(act('ANSWER', answer))).info.correct;
    };
    expect(await verdict({}, nearby)).toBe(true);
    expect(await verdict({ floatMatch: 'precision' }, nearby)).toBe(false);
    expect(await verdict({ floatMatch: 'precision' }, question.gold_answer)).toBe(true);
  });

  it('rejects invalid actions, steps before reset, concurrent steps and use after close', async () => {
    const e = env();
    await expectCode(e.step(act('DESCRIBE', 'singer')), ErrorCode.EPISODE_STATE);
    await e.reset({ question_id: 'shop_train_0' });
    await expectCode(e.step({ action_type: 'DROP', argument: 'x' } as unknown as SqlAction), ErrorCode.VALIDATION);
    await expectCode(e.step({ action_type: 'QUERY', argument: 'SELECT 1', extra: 1 } as unknown as SqlAction), ErrorCode.VALIDATION);
    const first = e.step(act('QUERY', 'SELECT count(*) FROM singer'));
    await expectCode(e.step(act('QUERY', 'SELECT 1')), ErrorCode.EPISODE_STATE);
    expect((await first).observation.error).toBe('');
    e.close();
    e.close();
    await expectCode(() => e.reset(), ErrorCode.EPISODE_STATE);
  });

  it('rejects bad config with VALIDATION', () => {
    expect(() => env({ stepBudget: 0 })).toThrow(AppError);
    expect(() => env({ reward: { stepClipMin: 1, stepClipMax: 0 } })).toThrow(/stepClipMin/);
  });
});

describe('gold leakage', () => {
  it('never puts the gold SQL or reward internals in an observation of an oracle-like episode', async () => {
    for (const question of dataset.questions) {
      const e = env();
      const observations: SqlObservation[] = [(await e.reset({ question_id: question.question_id })).observation];
      const outcomes: StepOutcome[] = [];
      for (const table of question.tables_involved) outcomes.push(await e.step(act('DESCRIBE', table)));
      // The oracle's own query, spelled differently: the exact gold text must then never show up.
      outcomes.push(await e.step(act('QUERY', question.gold_sql.toLowerCase().replace(/\s+/g, '  '))));
      outcomes.push(await e.step(act('SAMPLE', question.tables_involved[0] as string)));
      outcomes.push(await e.step(act('ANSWER', question.gold_answer)));
      expect(outcomes.at(-1)?.info.correct).toBe(true);
      observations.push(...outcomes.map((o) => o.observation));
      for (const observation of observations) {
        expect(Object.keys(observation).sort()).toEqual(['action_history', 'budget_remaining', 'error', 'question', 'result', 'schema_info', 'step_count']);
        const text = JSON.stringify(observation);
        expect(text).not.toContain(question.gold_sql);
        expect(text).not.toMatch(/reward|potential|gold|correct|terminal/i);
      }
    }
  });
});

describe('concurrency', () => {
  it('runs many environments in parallel on one executor, each with its own episode', async () => {
    const sampleCache = new SampleCache();
    const envs = Array.from({ length: 60 }, () => new SqlEnvironment({ dataset, executor, sampleCache }));
    const results = await Promise.all(
      envs.map(async (e, i) => {
        await e.reset({ seed: i, episode_id: `ep-${i}` });
        const question = dataset.question(e.state().question_id as string);
        if (question === undefined) throw new Error('no question');
        const sample = await e.step(act('SAMPLE', 'singer'));
        const query = await e.step(act('QUERY', `SELECT count(*) FROM singer WHERE id <= ${(i % 50) + 1}`));
        const answer = await e.step(act('ANSWER', question.gold_answer));
        return { i, state: e.state(), sample, query, answer };
      }),
    );
    for (const { i, state, sample, query, answer } of results) {
      expect(state.episode_id).toBe(`ep-${i}`);
      expect(sample.observation.result).toContain('Singer 05');
      expect(query.observation.result).toBe(`count(*)\n${(i % 50) + 1}\n(1 row)`);
      expect(answer.info.correct).toBe(true);
      expect(state).toMatchObject({ done: true, step_count: 3 });
    }
    expect(sampleCache.size).toBe(1);
  });
});
