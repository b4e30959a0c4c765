import { describe, expect, it } from 'vitest';
import { logprobMismatch } from './logprob-mismatch.ts';
import type { PolicySample } from './micro-batches.ts';

const ln = Math.log;
const k3 = (r: number): number => Math.exp(r) - 1 - r;

describe('logprobMismatch', () => {
  // Loss tokens 1..3 of the first sample (r = ln 3, −0.5, 0) and token 1 of the second (r = 0.2);
  // the masked tokens carry differences that must not count.
  const samples: PolicySample[] = [
    { inputIds: [1, 2, 3, 4], lossMask: [0, 1, 1, 1], behaviourLogprobs: [0, -1 - ln(3), -1.5, -2], behaviourLag: [-1, 0, 0, 1], advantage: 1, temperature: 1 },
    { inputIds: [1, 2, 3], lossMask: [0, 1, 0], behaviourLogprobs: [-9, -0.7, -9], advantage: -1, temperature: 1 },
  ];
  const learner = [[5, -1, -2, -2], [0, -0.5, 0]];

  it('averages |r|, k3 = exp(r) − 1 − r and min(exp(r), C) over loss tokens, r = learner − rollout', () => {
    const { all } = logprobMismatch(samples, learner, 2);
    const r = [ln(3), -0.5, 0, 0.2];
    expect(all.tokens).toBe(4);
    expect(all.absLogprobMean).toBeCloseTo((ln(3) + 0.5 + 0 + 0.2) / 4, 12);
    expect(all.k3Mean).toBeCloseTo(r.map(k3).reduce((a, b) => a + b) / 4, 12);
    expect(all.importanceWeightMean).toBeCloseTo((2 + Math.exp(-0.5) + 1 + Math.exp(0.2)) / 4, 12);
  });

  it('fresh: only tokens of lag 0 (a sample without lags has none); cap 0 means a weight of 1', () => {
    const { fresh } = logprobMismatch(samples, learner, 0);
    expect(fresh).toEqual({ tokens: 2, absLogprobMean: (ln(3) + 0.5) / 2, k3Mean: (k3(ln(3)) + k3(-0.5)) / 2, importanceWeightMean: 1 });
    expect(logprobMismatch([samples[1]!], [learner[1]!], 2).fresh).toBeNull();
  });

  it('agreeing log-probs give zero mismatch and weight 1', () => {
    const same = logprobMismatch(samples, samples.map((s) => [...s.behaviourLogprobs]), 2);
    expect(same.all).toEqual({ tokens: 4, absLogprobMean: 0, k3Mean: 0, importanceWeightMean: 1 });
  });
});
