import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { QuestionRecord } from '@sqlenv/protocol';
import { SqlExecutor } from '../sandbox/index.ts';
import { loadDataset } from '../dataset/load-dataset.ts';
import { createRewardTracker } from '../reward/reward-tracker.ts';
import { parseRewardConfig } from '../reward/reward-config.ts';
import { deriveAnswerType } from './derive-answer-type.ts';
import { formatGoldAnswer } from './format-gold-answer.ts';
import { verifyAnswer } from './verify-answer.ts';

// The verifier and the reward against every question of a real dataset: the
// Spider copy when SPIDER_DIR is set (CI), else the built-in dataset.
const source = process.env['SPIDER_DIR'] ?? 'builtin';
let executor: SqlExecutor;
let questions: readonly QuestionRecord[];

beforeAll(async () => {
  executor = new SqlExecutor({ poolSize: 2 });
  questions = (await loadDataset(source, { executor })).questions;
}, 300_000);
afterAll(async () => {
  await executor.close();
});

describe(`gold answers of the ${source === 'builtin' ? 'built-in' : 'Spider'} dataset`, () => {
  it('are canonical and verify as correct against their own question', () => {
    expect(questions.length).toBeGreaterThan(0);
    const failures: string[] = [];
    for (const q of questions) {
      const type = deriveAnswerType(q.gold_columns, q.gold_rows);
      const canonical = formatGoldAnswer(q.answer_type, q.gold_rows);
      const verdict = verifyAnswer(q.gold_answer, q);
      if (type !== q.answer_type || canonical !== q.gold_answer || !verdict.correct) {
        failures.push(`${q.question_id}: type ${q.answer_type}/${type}, ${verdict.reason}`);
      }
    }
    expect(failures).toEqual([]);
  });

  it('give the oracle episode DESCRIBE, DESCRIBE, QUERY(gold), ANSWER its 1.17', () => {
    const config = parseRewardConfig();
    for (const q of questions) {
      const tracker = createRewardTracker(config, { rows: q.gold_rows });
      tracker.onStep({ actionType: 'DESCRIBE', argument: 'a', ok: true });
      tracker.onStep({ actionType: 'DESCRIBE', argument: 'b', ok: true });
      const query = tracker.onStep({ actionType: 'QUERY', argument: q.gold_sql, ok: true, rows: q.gold_rows });
      tracker.onAnswer(true);
      expect(query.potential, q.question_id).toBe(1);
      expect(tracker.totalReward, q.question_id).toBeCloseTo(1.17, 9);
    }
  });

  it('reject a wrong answer of the right shape', () => {
    for (const q of questions.filter((r) => r.answer_type === 'integer')) {
      const gold = Number(q.gold_answer);
      expect(verifyAnswer(String(gold + 1), q).correct, q.question_id).toBe(false);
    }
  });
});
