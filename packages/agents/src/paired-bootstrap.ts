import { mulberry32 } from '@sqlenv/shared';

/** One question's paired episodes: how many, and how many each policy solved (the same seeds for both). */
export interface PairedQuestion {
  episodes: number;
  before: number;
  after: number;
}

export interface PairedBootstrapOptions {
  /** Bootstrap resamples. Default 10,000 (the interval's ends move by well under 0.1 points between seeds). */
  resamples?: number;
  /** Seed of the resampling, so one evaluation pair always gives one interval. Default 0. */
  seed?: number;
  /** Two-sided confidence level. Default 0.95. */
  level?: number;
}

export interface PairedDifference {
  /** Success after − success before over the paired episodes. */
  diff: number;
  /** The percentile interval of diff over the resamples, [low, high]. */
  ci: [number, number];
  /** The confidence level of `ci`. */
  level: number;
  questions: number;
  episodes: number;
  resamples: number;
}

/**
 * after − before success with a confidence interval from a paired bootstrap over questions
 * (Efron & Tibshirani 1993, ch. 13, percentile interval): each resample draws as many questions as
 * there are, with replacement, and keeps every question's episodes together with both of their
 * outcomes. Questions, not episodes, are the unit because the episodes of one question are not
 * independent (an easy question is easy at every seed), and both outcomes travel together because
 * before and after played the same questions with the same seeds: what varies between questions
 * (their difficulty) cancels in the difference, so the interval is much narrower than two
 * independent ones would suggest.
 */
export function pairedBootstrap(questions: readonly PairedQuestion[], options: PairedBootstrapOptions = {}): PairedDifference {
  const resamples = options.resamples ?? 10_000;
  const level = options.level ?? 0.95;
  if (!Number.isInteger(resamples) || resamples < 1) throw new RangeError(`resamples must be a positive integer (got ${resamples})`);
  if (!(level > 0 && level < 1)) throw new RangeError(`level must lie in (0, 1) (got ${level})`);
  if (questions.length === 0) throw new RangeError('a paired bootstrap needs at least one question played by both policies');
  for (const [i, q] of questions.entries()) {
    const ok = Number.isInteger(q.episodes) && q.episodes > 0 && [q.before, q.after].every((s) => Number.isInteger(s) && s >= 0 && s <= q.episodes);
    if (!ok) throw new RangeError(`question ${i}: episodes must be a positive integer and before/after successes integers in [0, episodes] (got ${JSON.stringify(q)})`);
  }
  const gains = questions.map((q) => q.after - q.before);
  const counts = questions.map((q) => q.episodes);
  const episodes = counts.reduce((a, b) => a + b, 0);
  const diff = gains.reduce((a, b) => a + b, 0) / episodes;
  const rng = mulberry32(options.seed ?? 0);
  const stats = new Float64Array(resamples);
  const q = questions.length;
  for (let r = 0; r < resamples; r++) {
    let gain = 0;
    let n = 0;
    for (let j = 0; j < q; j++) {
      const pick = Math.floor(rng() * q);
      gain += gains[pick] as number;
      n += counts[pick] as number;
    }
    // Success rates over the resampled episodes (a question with more seeds weighs more, as in diff).
    stats[r] = gain / n;
  }
  stats.sort();
  const tail = (1 - level) / 2;
  return { diff, ci: [quantile(stats, tail), quantile(stats, 1 - tail)], level, questions: q, episodes, resamples };
}

/** The p-quantile of sorted values, interpolated linearly between order statistics (Hyndman & Fan type 7). */
function quantile(sorted: Float64Array, p: number): number {
  const h = (sorted.length - 1) * p;
  const lo = Math.floor(h);
  const hi = Math.min(sorted.length - 1, lo + 1);
  return (sorted[lo] as number) + (h - lo) * ((sorted[hi] as number) - (sorted[lo] as number));
}

/** One episode of an evaluation as pairing needs it. */
export interface SeededOutcome {
  question: string;
  seed: number;
  success: boolean;
}

/**
 * The episodes two evaluations share, matched by question and seed and grouped by question (in
 * the order `before` first plays them). Episodes only one of them played are left out: they have
 * no partner to difference against.
 */
export function pairByQuestion(before: readonly SeededOutcome[], after: readonly SeededOutcome[]): PairedQuestion[] {
  const key = (o: SeededOutcome): string => `${o.question}\u0000${o.seed}`;
  const waiting = new Map<string, SeededOutcome[]>();
  for (const o of after) {
    const list = waiting.get(key(o)) ?? [];
    list.push(o);
    waiting.set(key(o), list);
  }
  const byQuestion = new Map<string, PairedQuestion>();
  for (const b of before) {
    const a = waiting.get(key(b))?.shift();
    if (a === undefined) continue;
    const q = byQuestion.get(b.question) ?? { episodes: 0, before: 0, after: 0 };
    q.episodes += 1;
    if (b.success) q.before += 1;
    if (a.success) q.after += 1;
    byQuestion.set(b.question, q);
  }
  return [...byQuestion.values()];
}
