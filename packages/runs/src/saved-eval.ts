import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { pairByQuestion, pairedBootstrap, passAtKs, TranscriptTurnSchema, type EvaluationReport, type PairedDifference, type PassAtK, type TranscriptCollector } from '@sqlenv/agents';
import { EpisodeDoneReason, SplitName } from '@sqlenv/protocol';
import { AppError, checkFileOutput, ErrorCode, formatZodIssues, writeFileAtomic } from '@sqlenv/shared';
import { EVALS_DIR, savedEvalPath } from './run-files.ts';

/** File-name-safe: letters, digits, '.', '_', '-', starting with a letter or digit. */
export const EvalNameSchema = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'an evaluation name is letters, digits, ".", "_" and "-" (at most 64)');

/** One evaluated episode: its question, outcome and transcript. */
export const SavedEvalEpisodeSchema = z.strictObject({
  question_id: z.string(),
  db_id: z.string(),
  seed: z.number().int().nonnegative(),
  /** The question as the agent saw it ("" when the episode never started). */
  question: z.string(),
  correct: z.boolean(),
  reward: z.number(),
  steps: z.number().int().nonnegative(),
  /** Turns whose reply held no valid tool call. */
  format_errors: z.number().int().nonnegative(),
  /** Tokens the model wrote (0 for text-only policies). */
  tokens: z.number().int().nonnegative(),
  done_reason: EpisodeDoneReason.nullable(),
  /** Why the episode could not be played (null when it was). */
  error: z.string().nullable(),
  transcript: z.array(TranscriptTurnSchema),
});
export type SavedEvalEpisode = z.infer<typeof SavedEvalEpisodeSchema>;

/**
 * `evals/<name>.json`: an evaluation of the policy at one version, kept so that the run report can
 * plot it on the training curves and compare it question by question with another one.
 */
export const SavedEvalSchema = z.strictObject({
  schema_version: z.literal(1),
  name: EvalNameSchema,
  /** The policy version evaluated (0 = before any update). */
  version: z.number().int().nonnegative(),
  /** The training run whose evaluation this is (a run directory's held-out evaluations); absent for a standalone `sqlenv eval` and in older files. */
  run_id: z.string().optional(),
  dataset: z.string(),
  split: SplitName.nullable(),
  policy: z.string(),
  /** Base seeds: episode i of a pass with base seed s resets with seed s + i. */
  seeds: z.array(z.number().int().nonnegative()),
  created_at: z.string(),
  episodes_count: z.number().int().nonnegative(),
  success_rate: z.number().min(0).max(1),
  mean_reward: z.number(),
  format_error_rate: z.number().min(0).max(1),
  /** Share of episodes whose last query returned the gold rows (Φ = 1); null: the environment sent no reward breakdown; absent in older files. */
  gold_rows_rate: z.number().min(0).max(1).nullable().optional(),
  /** Of those, the share answered correctly (null: none had the gold rows). */
  answer_given_gold_rows: z.number().min(0).max(1).nullable().optional(),
  /** pass@k by k ("1", "4", "8"; null: some question had fewer than k episodes); absent in older files (passAtKOf recomputes it). */
  pass_at_k: z.record(z.string().regex(/^[1-9]\d*$/, 'k is a positive integer'), z.number().min(0).max(1).nullable()).optional(),
  episodes: z.array(SavedEvalEpisodeSchema),
});
export type SavedEval = z.infer<typeof SavedEvalSchema>;

/**
 * The 95 % Wilson score interval of a success rate: k successes in n episodes, z = 1.96
 * (Wilson 1927; it stays inside [0, 1] and keeps its coverage near 0 and 1, unlike p ± z·√(p(1−p)/n)).
 * [0, 1] for n = 0.
 */
export function wilsonInterval(successes: number, n: number, z = 1.959963984540054): [number, number] {
  if (n <= 0) return [0, 1];
  const p = successes / n;
  const z2 = z * z;
  const centre = (p + z2 / (2 * n)) / (1 + z2 / n);
  const half = (z / (1 + z2 / n)) * Math.sqrt((p * (1 - p)) / n + z2 / (4 * n * n));
  // At k = 0 and k = n the bound is exactly 0 or 1 (rounding would leave 1e-17 or 0.9999999999999999).
  return [successes <= 0 ? 0 : Math.max(0, centre - half), successes >= n ? 1 : Math.min(1, centre + half)];
}

/** A saved evaluation's success rate with its 95 % Wilson interval over its episodes. */
export function successInterval(saved: Pick<SavedEval, 'episodes'>): { successes: number; episodes: number; rate: number; ci95: [number, number] } {
  const successes = saved.episodes.filter((ep) => ep.correct).length;
  const episodes = saved.episodes.length;
  return { successes, episodes, rate: episodes === 0 ? 0 : successes / episodes, ci95: wilsonInterval(successes, episodes) };
}

export interface SavedEvalMeta {
  name: string;
  version: number;
  dataset: string;
  split: SplitName | null;
  seeds: readonly number[];
  /** The training run it belongs to (recorded as run_id). */
  runId?: string;
  /** The question text by id, for episodes whose transcript does not show it. */
  questionText?: (questionId: string) => string | undefined;
}

/**
 * A saved evaluation from evaluate()'s report and the transcripts collected during it (pass the
 * collector's `onTurn` to evaluate's options; several passes may be concatenated first).
 */
export function savedEvalFromReport(report: EvaluationReport, transcripts: TranscriptCollector, meta: SavedEvalMeta): SavedEval {
  const episodes = report.records.map((record) => {
    const questionId = record.question_id ?? '';
    return {
      question_id: questionId,
      db_id: record.db_id ?? '',
      seed: record.seed,
      question: transcripts.question(record.index) ?? meta.questionText?.(questionId) ?? '',
      correct: record.success,
      reward: record.reward,
      steps: record.steps,
      format_errors: record.format_errors,
      tokens: record.generated_tokens,
      done_reason: record.done_reason,
      error: record.error,
      transcript: transcripts.turns(record.index),
    };
  });
  return parseSavedEval({
    schema_version: 1,
    name: meta.name,
    version: meta.version,
    ...(meta.runId === undefined ? {} : { run_id: meta.runId }),
    dataset: meta.dataset,
    split: meta.split,
    policy: report.policy,
    seeds: [...meta.seeds],
    created_at: new Date().toISOString(),
    episodes_count: report.episodes,
    success_rate: report.success_rate,
    mean_reward: report.mean_reward,
    format_error_rate: report.format_error_rate,
    gold_rows_rate: report.gold_rows_rate,
    answer_given_gold_rows: report.answer_given_gold_rows,
    pass_at_k: report.pass_at_k,
    episodes,
  });
}

/** A saved evaluation's pass@k: as saved, or computed from its episodes for a file that predates it. */
export function passAtKOf(saved: Pick<SavedEval, 'pass_at_k' | 'episodes'>): PassAtK {
  return saved.pass_at_k ?? passAtKs(saved.episodes.map((ep) => ({ question: ep.question_id, success: ep.correct })));
}

/**
 * after − before success over the episodes two evaluations share (same question and seed), with the
 * 95 % paired-bootstrap interval over questions (10,000 resamples, seed 0: one pair of files always
 * gives one interval). Null when they share no episode.
 */
export function pairedDifferenceOf(before: Pick<SavedEval, 'episodes'>, after: Pick<SavedEval, 'episodes'>): PairedDifference | null {
  const outcomes = (saved: Pick<SavedEval, 'episodes'>): Array<{ question: string; seed: number; success: boolean }> => saved.episodes.map((ep) => ({ question: ep.question_id, seed: ep.seed, success: ep.correct }));
  const questions = pairByQuestion(outcomes(before), outcomes(after));
  return questions.length === 0 ? null : pairedBootstrap(questions, { resamples: 10_000, seed: 0 });
}

function parseSavedEval(value: unknown, label = 'saved evaluation'): SavedEval {
  const parsed = SavedEvalSchema.safeParse(value);
  if (!parsed.success) throw new AppError(ErrorCode.VALIDATION, `${label}: ${formatZodIssues(parsed.error)}`);
  return parsed.data;
}

/**
 * Refuse an evaluation name already saved in the run directory unless `force` (a second `--eval-name
 * after` would silently replace the first): called before the episodes are played, and again when
 * writing.
 */
export function checkSavedEvalTarget(runDir: string, name: string, options: { force?: boolean } = {}): void {
  checkFileOutput(savedEvalPath(runDir, name), { force: options.force ?? false, label: `evaluation ${name}:` });
}

/**
 * Write `runDir/evals/<name>.json` (through a temporary file, so a reader never sees half of it);
 * returns its path. An existing evaluation of that name is refused unless `force`.
 */
export function writeSavedEval(runDir: string, saved: SavedEval, options: { force?: boolean } = {}): string {
  const path = savedEvalPath(runDir, saved.name);
  checkSavedEvalTarget(runDir, saved.name, options);
  return writeFileAtomic(path, `${JSON.stringify(parseSavedEval(saved))}\n`);
}

/** Every saved evaluation of a run directory, by version then name (none: []). */
export function readSavedEvals(runDir: string, options: { runId?: string } = {}): SavedEval[] {
  const dir = join(runDir, EVALS_DIR);
  if (!existsSync(dir)) return [];
  const evals = readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .map((f) => {
      const path = join(dir, f);
      let json: unknown;
      try {
        json = JSON.parse(readFileSync(path, 'utf8'));
      } catch (cause) {
        throw new AppError(ErrorCode.VALIDATION, `${path} is not valid JSON`, { cause });
      }
      const saved = parseSavedEval(json, path);
      // A result is computed only from the evaluations of the run asking (the run id is in each).
      if (options.runId !== undefined && saved.run_id !== options.runId) {
        throw new AppError(ErrorCode.VALIDATION, `${path} is an evaluation of ${saved.run_id === undefined ? 'no training run' : `run ${saved.run_id}`}, not of run ${options.runId}`);
      }
      return saved;
    });
  return evals.sort((a, b) => a.version - b.version || a.name.localeCompare(b.name));
}
