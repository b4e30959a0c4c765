import { describe, expect, it } from 'vitest';
import { pairByQuestion, pairedBootstrap, type PairedQuestion } from './paired-bootstrap.ts';
import { mulberry32 } from '@sqlenv/shared';

/** The 95 % Wilson interval (as the run report computes it), to compare with. */
function wilson(k: number, n: number, z = 1.959963984540054): [number, number] {
  const p = k / n;
  const centre = (p + (z * z) / (2 * n)) / (1 + (z * z) / n);
  const half = (z / (1 + (z * z) / n)) * Math.sqrt((p * (1 - p)) / n + (z * z) / (4 * n * n));
  return [centre - half, centre + half];
}

describe('pairedBootstrap', () => {
  it('two questions, one gained and one unchanged: diff ½, the interval spans the three possible resamples [0, 1]', () => {
    // Resamples: {q1,q1} → 1 (¼), {q1,q2} → ½ (½), {q2,q2} → 0 (¼): the 2.5 % and 97.5 % points are 0 and 1.
    const result = pairedBootstrap([{ episodes: 1, before: 0, after: 1 }, { episodes: 1, before: 1, after: 1 }], { resamples: 4000, seed: 3 });
    expect(result.diff).toBe(0.5);
    expect(result.ci).toEqual([0, 1]);
    expect(result).toMatchObject({ questions: 2, episodes: 2, resamples: 4000, level: 0.95 });
  });

  it('its interval has the width the normal approximation gives for many questions (±1.96 standard errors)', () => {
    // 200 questions of 4 seeds whose per-question gain is −1…+2 episodes: the standard error of the
    // mean gain is sd / √Q; the bootstrap's 95 % interval should be diff ± 1.96 SE to within a few %.
    const rng = mulberry32(11);
    const questions: PairedQuestion[] = Array.from({ length: 200 }, () => {
      const before = Math.floor(rng() * 3);
      const after = Math.min(4, Math.max(0, before + Math.floor(rng() * 4) - 1));
      return { episodes: 4, before, after };
    });
    const rates = questions.map((q) => (q.after - q.before) / 4);
    const mean = rates.reduce((a, b) => a + b, 0) / rates.length;
    const sd = Math.sqrt(rates.reduce((a, r) => a + (r - mean) ** 2, 0) / rates.length);
    const se = sd / Math.sqrt(rates.length);
    const result = pairedBootstrap(questions, { resamples: 20_000, seed: 1 });
    expect(result.diff).toBeCloseTo(mean, 12);
    expect(result.ci[0]).toBeCloseTo(mean - 1.96 * se, 2);
    expect(result.ci[1]).toBeCloseTo(mean + 1.96 * se, 2);
    expect((result.ci[1] - result.ci[0]) / (2 * 1.96 * se)).toBeGreaterThan(0.95);
    expect((result.ci[1] - result.ci[0]) / (2 * 1.96 * se)).toBeLessThan(1.05);
  });

  it('excludes 0 where the two Wilson intervals overlap: 60 questions × 8 seeds, 20 questions gain one episode, none loses', () => {
    const questions: PairedQuestion[] = Array.from({ length: 60 }, (_, i) => {
      const before = i < 34 ? 2 : 0; // 68 of 480 = 14.2 %
      return { episodes: 8, before, after: before + (i % 3 === 0 ? 1 : 0) }; // 88 of 480 = 18.3 %
    });
    const before = questions.reduce((a, q) => a + q.before, 0);
    const after = questions.reduce((a, q) => a + q.after, 0);
    expect([before, after]).toEqual([68, 88]);
    const [, beforeHigh] = wilson(before, 480);
    const [afterLow] = wilson(after, 480);
    expect(afterLow).toBeLessThan(beforeHigh); // the independent intervals overlap: "not improved" by that test
    const result = pairedBootstrap(questions, { resamples: 2000, seed: 0 });
    expect(result.diff).toBeCloseTo(20 / 480, 12);
    expect(result.ci[0]).toBeGreaterThan(0);
    expect(result.ci[1]).toBeLessThan(0.07);
  });

  it('is deterministic for a seed and moves little between seeds', () => {
    const questions: PairedQuestion[] = Array.from({ length: 60 }, (_, i) => ({ episodes: 8, before: i % 5, after: (i * 7) % 6 }));
    const a = pairedBootstrap(questions, { seed: 5 });
    expect(pairedBootstrap(questions, { seed: 5 })).toEqual(a);
    const b = pairedBootstrap(questions, { seed: 6 });
    expect(Math.abs(a.ci[0] - b.ci[0])).toBeLessThan(0.005);
    expect(Math.abs(a.ci[1] - b.ci[1])).toBeLessThan(0.005);
  });

  it('degenerate cases: nothing changed, one question, identical questions, a bad input', () => {
    // Every episode the same before and after: diff 0, interval [0, 0].
    expect(pairedBootstrap([{ episodes: 8, before: 3, after: 3 }, { episodes: 8, before: 0, after: 0 }])).toMatchObject({ diff: 0, ci: [0, 0] });
    // One question: every resample is that question.
    expect(pairedBootstrap([{ episodes: 4, before: 1, after: 3 }])).toMatchObject({ diff: 0.5, ci: [0.5, 0.5] });
    // All questions alike: no spread whatever is drawn.
    const alike = pairedBootstrap(Array.from({ length: 10 }, () => ({ episodes: 2, before: 0, after: 1 })));
    expect(alike.diff).toBe(0.5);
    expect(alike.ci[0]).toBeCloseTo(0.5, 12);
    expect(alike.ci[1]).toBeCloseTo(0.5, 12);
    expect(() => pairedBootstrap([])).toThrow(/at least one question/);
    expect(() => pairedBootstrap([{ episodes: 2, before: 3, after: 0 }])).toThrow(/question 0/);
    expect(() => pairedBootstrap([{ episodes: 2, before: 0, after: 0 }], { resamples: 0 })).toThrow(/resamples/);
  });
});

describe('pairByQuestion', () => {
  it('matches episodes by question and seed, groups them by question and leaves unmatched ones out', () => {
    const before = [
      { question: 'a', seed: 1, success: true },
      { question: 'a', seed: 2, success: false },
      { question: 'b', seed: 3, success: false },
      { question: 'c', seed: 4, success: true }, // after never played c
    ];
    const after = [
      { question: 'b', seed: 3, success: true },
      { question: 'a', seed: 2, success: true },
      { question: 'a', seed: 1, success: true },
      { question: 'a', seed: 9, success: true }, // before never played this seed
    ];
    expect(pairByQuestion(before, after)).toEqual([{ episodes: 2, before: 1, after: 2 }, { episodes: 1, before: 0, after: 1 }]);
  });
});
