import { z } from 'zod';
import { PARSE_ERROR_ACTION, type BatchStats, type Trajectory } from '@sqlenv/protocol';

/**
 * The learner's numbers of one update (PolicyUpdater.lastUpdateStats): the five every GRPO
 * learner reports, plus any extra named numbers (entropy, ratio statistics, …) it wants in the
 * run directory. NaN or infinite values are allowed here: the metrics line records which ones
 * were not finite instead of hiding them.
 */
export const UpdateStatsSchema = z
  .object({
    loss: z.number(),
    /** Null where the objective has none (no reference term, SFT). */
    kl: z.number().nullable(),
    clip_fraction: z.number().nullable(),
    grad_norm: z.number(),
    learning_rate: z.number(),
  })
  .catchall(z.number().nullable());
export type UpdateStats = z.infer<typeof UpdateStatsSchema>;

const UPDATE_FIELDS = ['loss', 'kl', 'clip_fraction', 'grad_norm', 'learning_rate'] as const;

const rate = z.number().min(0).max(1);
const nonNegative = z.number().nonnegative();
const learnerNumber = z.number().nullable();

/**
 * One line of a run directory's metrics.jsonl: one policy version. The five learner numbers are
 * null when the updater records none (the statistics-only updater) or when the value was not
 * finite (then its name is in `non_finite`).
 */
export const RunMetricsLineSchema = z.strictObject({
  /** The policy version this update produced. */
  version: z.number().int().positive(),
  /** Milliseconds since the run (this run directory's recording) started. */
  time: nonNegative,
  /** Episodes in the trained batch. */
  episodes: z.number().int().nonnegative(),
  reward_mean: z.number(),
  success_rate: rate,
  /** Steps whose action was PARSE_ERROR ÷ all steps of the batch. */
  format_error_rate: rate,
  /** Completion tokens per episode (0 for text-only policies). */
  mean_tokens: nonNegative,
  loss: learnerNumber,
  kl: learnerNumber,
  clip_fraction: learnerNumber,
  grad_norm: learnerNumber,
  learning_rate: learnerNumber,
  /** Further learner numbers (finite ones only). */
  extra: z.record(z.string(), z.number()),
  /** Learner numbers that were NaN or infinite. */
  non_finite: z.array(z.string()),
  /** Staleness (versions behind: trained version − 1 − the oldest turn's policy version) → trajectories. */
  staleness_histogram: z.record(z.string().regex(/^\d+$/), z.number().int().nonnegative()),
  /** Trained episodes (and completion tokens) per second of wall time since the previous version. */
  episodes_per_s: nonNegative,
  tokens_per_s: nonNegative,
  /** Where the trainer's wall time since the previous version went, in seconds (rollout_wait, read, update, commit, other). */
  phase_seconds: z.record(z.string(), nonNegative),
});
export type RunMetricsLine = z.infer<typeof RunMetricsLineSchema>;

/** Format errors, completion tokens and staleness of a batch's trajectories. */
export function trajectoryMetrics(version: number, trajectories: readonly (readonly Trajectory[])[]): { formatErrorRate: number; completionTokens: number; episodes: number; stalenessHistogram: Record<string, number> } {
  let steps = 0;
  let parseErrors = 0;
  let completionTokens = 0;
  let episodes = 0;
  const histogram: Record<string, number> = {};
  for (const group of trajectories) {
    for (const trajectory of group) {
      episodes += 1;
      for (const step of trajectory.steps) {
        steps += 1;
        if (step.action.action_type === PARSE_ERROR_ACTION) parseErrors += 1;
      }
      let oldest = version - 1;
      for (const turn of trajectory.turns) {
        completionTokens += turn.completion_ids.length;
        oldest = Math.min(oldest, turn.policy_version);
      }
      const staleness = String(Math.max(0, version - 1 - oldest));
      histogram[staleness] = (histogram[staleness] ?? 0) + 1;
    }
  }
  return { formatErrorRate: steps === 0 ? 0 : parseErrors / steps, completionTokens, episodes, stalenessHistogram: histogram };
}

export interface RunMetricsInput {
  stats: BatchStats;
  trajectories: readonly (readonly Trajectory[])[];
  updateStats: UpdateStats | null;
  phaseSeconds: Readonly<Record<string, number>>;
  /** Milliseconds since the run started. */
  timeMs: number;
  /** Wall seconds since the previous version (the throughput's denominator). */
  intervalSeconds: number;
}

/** The metrics line of one committed version. */
export function runMetricsLine(input: RunMetricsInput): RunMetricsLine {
  const { stats, updateStats } = input;
  const t = trajectoryMetrics(stats.version, input.trajectories);
  const nonFinite: string[] = [];
  const learner = (name: string): number | null => {
    const value = updateStats?.[name];
    // null: the objective has no such number (no KL term, no clipping in SFT): not recorded, not an error.
    if (value === undefined || value === null) return null;
    if (!Number.isFinite(value)) {
      nonFinite.push(name);
      return null;
    }
    return value;
  };
  const [loss, kl, clipFraction, gradNorm, learningRate] = UPDATE_FIELDS.map(learner);
  const extra: Record<string, number> = {};
  for (const name of Object.keys(updateStats ?? {}).filter((n) => !(UPDATE_FIELDS as readonly string[]).includes(n)).sort()) {
    const value = learner(name);
    if (value !== null) extra[name] = value;
  }
  const interval = input.intervalSeconds > 0 ? input.intervalSeconds : Number.POSITIVE_INFINITY;
  return RunMetricsLineSchema.parse({
    version: stats.version,
    time: Math.max(0, input.timeMs),
    episodes: stats.episodes,
    reward_mean: stats.reward_mean,
    success_rate: stats.success_rate,
    format_error_rate: t.formatErrorRate,
    mean_tokens: t.episodes === 0 ? 0 : t.completionTokens / t.episodes,
    loss: loss ?? null,
    kl: kl ?? null,
    clip_fraction: clipFraction ?? null,
    grad_norm: gradNorm ?? null,
    learning_rate: learningRate ?? null,
    extra,
    non_finite: nonFinite,
    staleness_histogram: t.stalenessHistogram,
    episodes_per_s: stats.episodes / interval,
    tokens_per_s: t.completionTokens / interval,
    phase_seconds: Object.fromEntries(Object.entries(input.phaseSeconds).map(([k, v]) => [k, Math.max(0, v)])),
  });
}
