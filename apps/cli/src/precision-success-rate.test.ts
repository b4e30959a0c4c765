import { describe, expect, it } from 'vitest';
import type { EpisodeRecord } from '@sqlenv/agents';
import type { QuestionRecord } from '@sqlenv/protocol';
import { precisionAwareSuccess, precisionSuccessRate } from './precision-success-rate.ts';

const question = (id: string, value: number): QuestionRecord => ({
  question_id: id,
  question_text: 'What is the average?',
  database_name: 'db',
  gold_sql: 'SELECT 1',
  gold_answer: String(value),
  gold_columns: ['avg'],
  gold_rows: [[value]],
  answer_type: 'float',
  difficulty: 'easy',
  tables_involved: [],
  split: 'dev',
});
const questions = new Map([['q1', question('q1', 203.5)], ['q2', question('q2', 47.99)]]);
const dataset = { question: (id: string) => questions.get(id) };

function record(questionId: string, answer: string | undefined, success: boolean): EpisodeRecord {
  return {
    question_id: questionId,
    success,
    done_reason: answer === undefined ? 'budget_exhausted' : 'answered',
    actions: answer === undefined ? [] : [{ action_type: 'ANSWER', argument: answer, reward: success ? 1 : 0, error: '' }],
  } as Partial<EpisodeRecord> as EpisodeRecord;
}

describe('precisionSuccessRate', () => {
  it('re-checks final answers with precision-aware floats: close answers no longer count', () => {
    const records = [record('q1', '203.5', true), record('q1', '203.6', true), record('q2', '48', true), record('q2', '47.994', true), record('q1', undefined, false)];
    expect(records.map((r) => precisionAwareSuccess(r, dataset))).toEqual([true, false, false, true, false]);
    expect(precisionSuccessRate(records, dataset)).toBe(0.4);
    expect(precisionSuccessRate([], dataset)).toBe(0);
  });

  it('counts an episode whose question is not in the local dataset as a failure', () => {
    expect(precisionAwareSuccess(record('elsewhere', '1', true), dataset)).toBe(false);
  });
});
