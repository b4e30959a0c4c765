import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { evaluate, TranscriptCollector, type Policy } from '@sqlenv/agents';
import type { BatchStats, Trajectory } from '@sqlenv/protocol';
import { renderRunReport, pickEvalPair } from './run-report.ts';
import { runMetricsLine, trajectoryMetrics, type RunMetricsLine } from './run-metrics.ts';
import { readSavedEvals, savedEvalFromReport, writeSavedEval, type SavedEval, type SavedEvalEpisode } from './saved-eval.ts';
import { escapeHtml, formatTick, lineChart, niceTicks } from './svg-chart.ts';
import { answeringEnvironment } from './testing/answering-environment.ts';

function trajectory(versions: number[], actions: string[], completionTokens: number): Trajectory {
  return {
    schema_version: 2,
    run_id: 'r',
    episode_id: 'e',
    group_id: 'g',
    index: 0,
    question_id: 'q',
    db_id: 'd',
    seed: 0,
    policy: 'p',
    attempt: 1,
    worker_id: 'w',
    started_at_ms: 0,
    sampling: null,
    turns: versions.map((v, turn) => ({ turn, policy_version: v, prompt_ids: [], completion_ids: Array.from({ length: completionTokens }, () => 1), loss_mask: Array.from({ length: completionTokens }, () => 1 as const), logprobs: Array.from({ length: completionTokens }, () => -1), action: null, parse_error: null, policy_ms: 0 })),
    steps: actions.map((a) => ({ action: { action_type: a as 'QUERY', argument: 'x' }, reward: 0, reward_breakdown: null, executed: true, error: '', done: false, env_ms: 0 })),
    outcome: { correct: false, total_reward: 0, steps: actions.length, done_reason: 'answered', error: null },
    timings: { queue_wait_ms: 0, env_ms: 0, policy_ms: 0, total_ms: 0 },
  };
}

const stats = (version: number): BatchStats => ({ version, group_ids: ['g'], episodes: 2, reward_mean: 0.5, reward_std: 0.1, success_rate: 0.5, mean_steps: 2, advantage_abs_mean: 1, min_sampled_version: 0, max_sampled_version: version - 1, max_staleness: 0, loss_tokens: 0 });

describe('metrics line', () => {
  it('counts PARSE_ERROR steps, completion tokens per episode and staleness per trajectory from the oldest turn', () => {
    const batch = [[trajectory([3, 4], ['PARSE_ERROR', 'QUERY'], 5), trajectory([4], ['PARSE_ERROR', 'ANSWER'], 3)], [trajectory([], [], 0)]];
    expect(trajectoryMetrics(5, batch)).toEqual({ formatErrorRate: 0.5, completionTokens: 13, episodes: 3, stalenessHistogram: { '1': 1, '0': 2 } });
    const line = runMetricsLine({ stats: stats(5), trajectories: batch, updateStats: null, phaseSeconds: { update: 2, rollout_wait: 1 }, timeMs: 1500, intervalSeconds: 4 });
    expect(line).toMatchObject({ version: 5, mean_tokens: 13 / 3, tokens_per_s: 13 / 4, episodes_per_s: 0.5, loss: null, kl: null, non_finite: [], extra: {} });
  });

  it('keeps infinite learner numbers out of the numbers and names them', () => {
    const line = runMetricsLine({ stats: stats(1), trajectories: [], updateStats: { loss: 1, kl: Number.POSITIVE_INFINITY, clip_fraction: 0, grad_norm: Number.NaN, learning_rate: 1e-5, ratio_max: Number.NaN }, phaseSeconds: {}, timeMs: 0, intervalSeconds: 1 });
    expect(line).toMatchObject({ loss: 1, kl: null, grad_norm: null, non_finite: ['kl', 'grad_norm', 'ratio_max'], extra: {} });
  });

  it('records a learner number the objective does not have (null) as not recorded, not as non-finite', () => {
    const line = runMetricsLine({ stats: stats(1), trajectories: [], updateStats: { loss: 0.5, kl: null, clip_fraction: 0, grad_norm: 1, learning_rate: 1e-5, truncated_fraction: null }, phaseSeconds: {}, timeMs: 0, intervalSeconds: 1 });
    expect(line).toMatchObject({ loss: 0.5, kl: null, clip_fraction: 0, non_finite: [], extra: {} });
  });
});

describe('mismatch in the report', () => {
  it('draws the mismatch and importance-weight curves from the metrics lines and states the last and the largest figures', () => {
    const update = (v: number) => ({ loss: 1, kl: null, clip_fraction: 0, grad_norm: 1, learning_rate: 1e-5, truncated_fraction: v === 2 ? 0.25 : 0, mismatch_abs_logprob: 0.01 * v, mismatch_k3: [0.002, 0.03, 0.001][v - 1]!, is_weight_mean: 1.01, mismatch_fresh_abs_logprob: null, mismatch_fresh_k3: v === 3 ? 0.0005 : null, fresh_token_fraction: 0.5, tis_cap: 2 });
    const metrics = [1, 2, 3].map((v) => runMetricsLine({ stats: stats(v), trajectories: [], updateStats: update(v), phaseSeconds: {}, timeMs: v, intervalSeconds: 1 }));
    expect(metrics[1]!.extra).toMatchObject({ mismatch_k3: 0.03, truncated_fraction: 0.25, tis_cap: 2 });
    expect(metrics[1]!.extra).not.toHaveProperty('mismatch_fresh_k3'); // null: not recorded
    const html = renderRunReport({ title: 'r', metrics, evals: [] });
    for (const id of ['mismatch_abs_logprob', 'mismatch_fresh_abs_logprob', 'mismatch_k3', 'mismatch_fresh_k3', 'is_weight_mean', 'truncated_fraction']) expect(html, id).toContain(`data-series="${id}"`);
    expect(html).toContain('Last update (v3): mean |Δ log-prob| 0.0300, k3 0.00100 (fresh tokens 0.00050), mean weight 1.0100 with cap C = 2.00 (0: off), 0.0 % of tokens at C. Largest k3 of the run: 0.03000 at v2.');
    expect(renderRunReport({ title: 'r', metrics: [], evals: [] })).toContain('No mismatch recorded');
  });
});

describe('svg charts', () => {
  it('picks round ticks and labels them exactly', () => {
    expect(niceTicks(0, 1, 4)).toEqual([0, 0.25, 0.5, 0.75, 1]);
    expect(niceTicks(0.03, 0.051, 4)).toEqual([0.03, 0.04, 0.05]);
    expect(niceTicks(0, 0.7, 7)).toEqual([0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]);
    expect(formatTick(0.25, 0.25)).toBe('0.25');
    expect(formatTick(0.035, 0.005)).toBe('0.035');
    expect(formatTick(400, 200)).toBe('400');
  });

  it('draws a curve per series, breaks it where a value is missing, and says "not recorded" when there is none', () => {
    const chart = lineChart({ id: 'c', title: 'T', xLabel: 'x', yLabel: 'y', series: [{ name: 'a', label: 'A', color: '#000', points: [{ x: 1, y: 1 }, { x: 2, y: null }, { x: 3, y: 2 }] }] });
    expect(chart.match(/<path class="series"/g)).toHaveLength(1);
    expect(/ d="M[\d.]+ [\d.]+ M[\d.]+ [\d.]+"/.test(chart)).toBe(true);
    expect(lineChart({ id: 'n', title: 'N', xLabel: 'x', yLabel: 'y', series: [{ name: 'a', label: 'A', color: '#000', points: [{ x: 1, y: null }] }] })).toContain('not recorded');
    expect(escapeHtml(`<a href="x" title='y'>&</a>`)).toBe('&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;');
  });
});

/** Answers "1" on every question: right on toy_q0 only; its text says something hostile. */
const hostilePolicy = (text: string): Policy => ({ name: 'hostile', begin: () => ({ act: () => Promise.resolve({ action_type: 'ANSWER', argument: text }) }) });

async function savedEval(name: string, version: number, answer: string): Promise<SavedEval> {
  const transcripts = new TranscriptCollector();
  const report = await evaluate(answeringEnvironment, hostilePolicy(answer), {
    questionIds: ['toy_q0', 'toy_q1'],
    seed: 5,
    onTurn: transcripts.onTurn,
  });
  return savedEvalFromReport(report, transcripts, { name, version, dataset: 'toy', split: 'dev', seeds: [5] });
}

/** A saved evaluation of `questions` questions × `seeds` seeds whose episode (q, s) is solved when solved(q, s). */
function syntheticEval(template: SavedEval, name: string, questions: number, seeds: number, solved: (q: number, s: number) => boolean): SavedEval {
  const ep = template.episodes[0] as SavedEvalEpisode;
  const episodes = Array.from({ length: questions * seeds }, (_, i) => ({ ...ep, question_id: `q${i % questions}`, seed: i, correct: solved(i % questions, Math.floor(i / questions)) }));
  const successRate = episodes.filter((x) => x.correct).length / episodes.length;
  return { ...template, name, episodes, episodes_count: episodes.length, success_rate: successRate };
}

describe('saved evaluations and the report page', () => {
  it('says "improved" when the paired interval lies above 0, and shows pass@8 for eight seeds', async () => {
    const template = await savedEval('before', 0, '1');
    const { pass_at_k: _p, ...older } = template;
    // 60 questions × 8 seeds; after solves one more seed of every third question and loses none.
    const before = syntheticEval(older, 'before', 60, 8, (q, s) => q < 34 && s < 2);
    const after = { ...syntheticEval(older, 'after', 60, 8, (q, s) => (q < 34 && s < 2) || (q % 3 === 0 && s === 7)), version: 4 };
    const html = renderRunReport({ title: 'r', metrics: [], evals: [before, after] });
    expect(html).toContain('data-paired="improved"');
    expect(html).toContain('<b>+4.2 points</b>');
    expect(html).toContain('improved with 95 % confidence');
    // before: 34 questions at 2 of 8 → pass@1 34·(2/8)/60, pass@8 34/60.
    expect(html).toContain(`pass@1/4/8 14.2 % / ${((100 * 34 * (1 - 15 / 70)) / 60).toFixed(1)} % / 56.7 %</span>`);
    // Worse beyond the noise says so too.
    expect(renderRunReport({ title: 'r', metrics: [], evals: [{ ...after, name: 'before', version: 0 }, { ...before, name: 'after', version: 4 }] })).toContain('worse with 95 % confidence');
  });


  it('saves transcripts, reads them back by version, and pairs before/after by question and seed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sqlenv-evals-'));
    try {
      const before = await savedEval('before', 0, '<b>1</b>');
      const after = await savedEval('after', 3, '0');
      writeSavedEval(dir, after);
      writeSavedEval(dir, before);
      writeSavedEval(dir, { ...before, name: 'mid', version: 1 });
      const evals = readSavedEvals(dir);
      expect(evals.map((x) => x.name)).toEqual(['before', 'mid', 'after']);
      expect(evals[0]?.episodes[0]).toMatchObject({ seed: 5, question: 'What is 0 times 7?', steps: 1, transcript: [{ turn: 0, action: { action_type: 'ANSWER', argument: '<b>1</b>' }, result: 'wrong', reward: 0, done: true }] });
      expect(pickEvalPair(evals)).toEqual({ before: evals[0], after: evals[2] });
      expect(pickEvalPair(evals.filter((x) => x.name !== 'before'))).toEqual({ before: evals[1], after: evals[2] });
      expect(pickEvalPair([evals[0] as SavedEval])).toBeNull();

      const metrics: RunMetricsLine[] = [1, 2, 3].map((v) => runMetricsLine({ stats: stats(v), trajectories: [], updateStats: { loss: 1 / v, kl: 0, clip_fraction: 0, grad_norm: 1, learning_rate: 1e-4 }, phaseSeconds: { update: 1 }, timeMs: v * 1000, intervalSeconds: 1 }));
      const html = renderRunReport({ title: '<run>', metrics, evals });
      expect(html).not.toContain('<b>1</b>');
      expect(html).toContain('&lt;b&gt;1&lt;/b&gt;');
      expect(html).toContain('<title>Run report: &lt;run&gt;</title>');
      expect(html).toContain("default-src 'none'");
      expect(html).not.toMatch(/<script|<link|src="http|url\(/);
      expect(html.match(/data-series="loss"/g)).toHaveLength(1);
      expect(html.match(/<tr data-outcome=/g)).toHaveLength(2);
      // The header says how often each evaluation had the gold rows and copied them, when the file has it.
      const withGold = renderRunReport({ title: 'r', metrics, evals: [{ ...before, gold_rows_rate: 0.25, answer_given_gold_rows: 0.5 }, { ...after, gold_rows_rate: 0, answer_given_gold_rows: null }] });
      expect(withGold).toContain('gold rows 25.0 %</span>, 50.0 % of them answered right');
      // None had the rows: no "answered right" share, pass@k next.
      expect(withGold).toContain('gold rows 0.0 %</span>, <span title="share of questions');
      const { gold_rows_rate: _g, answer_given_gold_rows: _a, ...older } = before;
      expect(renderRunReport({ title: 'r', metrics, evals: [older, { ...after, gold_rows_rate: null }] })).not.toContain('gold rows');
      // pass@k per evaluation (one episode per question: pass@4 and pass@8 have no estimate), and the paired test:
      // toy_q0 gained, toy_q1 unchanged — +50 points, but two questions cannot rule out 0.
      expect(after.pass_at_k).toEqual({ '1': 0.5, '4': null, '8': null });
      expect(html).toContain('pass@1/4/8 0.0 % / — / —</span>');
      expect(html).toContain('pass@1/4/8 50.0 % / — / —</span>');
      expect(html).toContain('data-paired="not-improved"');
      expect(html).toContain('<b>+50.0 points</b> <span class="ci" title="95 % paired bootstrap over questions, 10000 resamples">[+0.0, +100.0]</span> over 2 episode pairs of 2 questions');
      // A file written before pass@k existed: computed from its episodes.
      const { pass_at_k: _p, ...noPass } = after;
      expect(renderRunReport({ title: 'r', metrics, evals: [before, noPass] })).toContain('pass@1/4/8 50.0 % / — / —</span>');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a malformed saved evaluation by its path and field, and leaves the file as it was', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sqlenv-evals-'));
    try {
      const before = await savedEval('before', 0, '1');
      mkdirSync(join(dir, 'evals'));
      const file = join(dir, 'evals', 'before.json');
      const bad = JSON.stringify({ ...before, gold_rows_rate: 1.5 });
      writeFileSync(file, bad);
      expect(() => readSavedEvals(dir)).toThrow(/before\.json.*gold_rows_rate/s);
      expect(readFileSync(file, 'utf8')).toBe(bad);
      writeFileSync(file, '{"schema_version":1,');
      expect(() => readSavedEvals(dir)).toThrow(/before\.json is not valid JSON/);
      // Files written before the gold-rows counts existed still read.
      const { gold_rows_rate: _g, answer_given_gold_rows: _a, ...older } = before;
      writeFileSync(file, JSON.stringify(older));
      expect(readSavedEvals(dir)[0]?.gold_rows_rate).toBeUndefined();
      // pass@k is checked too: a rate outside [0, 1] or a k that is not a positive integer is refused by field.
      writeFileSync(file, JSON.stringify({ ...before, pass_at_k: { '1': 1.2 } }));
      expect(() => readSavedEvals(dir)).toThrow(/before\.json.*pass_at_k/s);
      writeFileSync(file, JSON.stringify({ ...before, pass_at_k: { k8: 0.5 } }));
      expect(() => readSavedEvals(dir)).toThrow(/before\.json.*pass_at_k/s);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
