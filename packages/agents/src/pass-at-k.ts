/** The k of pass@k every evaluation reports. */
export const PASS_AT_K = [1, 4, 8] as const;

/** pass@k by k ("1", "4", "8"); null where some question has fewer than k samples. */
export type PassAtK = Record<string, number | null>;

/**
 * The unbiased estimate of pass@k for one question from n samples of which c succeeded:
 * 1 − C(n−c, k) / C(n, k), the chance that k samples drawn without replacement from the n hold at
 * least one success (Chen et al. 2021, "Evaluating Large Language Models Trained on Code", eq. 1).
 * Computed as 1 − Π_{i=n−c+1}^{n} (1 − k/i), their numerically stable form: no binomial of 480
 * overflows a double. k > n has no estimate (RangeError).
 */
export function passAtKEstimate(n: number, c: number, k: number): number {
  if (!Number.isInteger(n) || !Number.isInteger(c) || !Number.isInteger(k) || n < 0 || c < 0 || c > n || k < 1) {
    throw new RangeError(`pass@k needs integers 0 ≤ c ≤ n and k ≥ 1 (got n ${n}, c ${c}, k ${k})`);
  }
  if (k > n) throw new RangeError(`pass@${k} needs at least ${k} samples of the question (got ${n})`);
  // Fewer failures than k: every draw of k holds a success.
  if (n - c < k) return 1;
  let allFail = 1;
  for (let i = n - c + 1; i <= n; i++) allFail *= 1 - k / i;
  return 1 - allFail;
}

/** One played episode as pass@k needs it: which question, and whether it was solved. */
export interface QuestionOutcome {
  question: string;
  success: boolean;
}

/**
 * pass@k of an evaluation: the per-question estimate averaged over its questions (each question
 * counts once however many samples it has). Null when some question has fewer than k samples, or
 * there are none.
 */
export function passAtK(outcomes: Iterable<QuestionOutcome>, k: number): number | null {
  const byQuestion = new Map<string, { n: number; c: number }>();
  for (const { question, success } of outcomes) {
    const counts = byQuestion.get(question) ?? { n: 0, c: 0 };
    counts.n += 1;
    if (success) counts.c += 1;
    byQuestion.set(question, counts);
  }
  if (byQuestion.size === 0) return null;
  let sum = 0;
  for (const { n, c } of byQuestion.values()) {
    if (k > n) return null;
    sum += passAtKEstimate(n, c, k);
  }
  return sum / byQuestion.size;
}

/** pass@k for each k of `ks` (default 1, 4, 8), keyed by k. */
export function passAtKs(outcomes: readonly QuestionOutcome[], ks: readonly number[] = PASS_AT_K): PassAtK {
  return Object.fromEntries(ks.map((k) => [String(k), passAtK(outcomes, k)]));
}
