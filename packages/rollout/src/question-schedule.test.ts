import { describe, expect, it } from 'vitest';
import { episodeSeed, QuestionSchedule } from './question-schedule.ts';
import { episodeJobId, groupJobId } from './ids.ts';

const questions = Array.from({ length: 5 }, (_, i) => ({ questionId: `q${i}`, dbId: 'db' }));

describe('QuestionSchedule', () => {
  it('deals every question once per epoch, reproducibly from the seed', () => {
    const a = new QuestionSchedule(questions, 3);
    const b = new QuestionSchedule([...questions].reverse(), 3);
    const epoch = (s: QuestionSchedule, e: number): string[] => Array.from({ length: 5 }, (_, i) => s.questionFor(e * 5 + i).questionId);
    expect(epoch(a, 0)).toEqual(epoch(b, 0));
    expect([...epoch(a, 0)].sort()).toEqual(questions.map((q) => q.questionId));
    expect([...epoch(a, 7)].sort()).toEqual(questions.map((q) => q.questionId));
    expect(epoch(a, 0)).not.toEqual(epoch(new QuestionSchedule(questions, 4), 0));
  });

  it('derives distinct episode seeds and ids without ":"', () => {
    const seeds = new Set(Array.from({ length: 100 }, (_, k) => episodeSeed(1, Math.floor(k / 4), k % 4)));
    expect(seeds.size).toBe(100);
    expect(groupJobId('run', 9, 4)).toBe('run.s2.g1');
    expect(episodeJobId('run', 9, 4, 3)).toBe('run.s2.g1.e3');
  });
});
