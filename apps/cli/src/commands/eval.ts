import { createWriteStream } from 'node:fs';
import { z } from 'zod';
import { createBaselinePolicy, evaluate, TranscriptCollector, type EvaluationReport, type Policy, type TurnEvent } from '@sqlenv/agents';
import type { ModelResources } from '@sqlenv/rollout';
import { SplitName } from '@sqlenv/protocol';
import type { Dataset } from '@sqlenv/sql-env';
import { SQLEnvClient } from '@sqlenv/client';
import { maxOf, minOf, PhaseProgress, progressMode, silentLogger } from '@sqlenv/shared';
import { episodesFlag, intFlag, MAX_EPISODES, parseFlags, positiveIntFlag, seedsFlag } from '../flags.ts';
import { DatasetFlags, datasetFlagOptions, openSqlRuntime } from '../dataset-flags.ts';
import type { CommandIo } from '../io.ts';
import { selectQuestionIds } from '../select-questions.ts';
import { UsageError } from '../cli-error.ts';
import { DETERMINISTIC_REMOTE, formatTurn, ModelFlags, modelFlagOptions, recordTrajectory, startModelPolicy } from '../model-policy.ts';
import { precisionSuccessRate } from '../precision-success-rate.ts';
import { startExecution } from '../execution-flags.ts';

const EvalFlags = ModelFlags.extend(DatasetFlags.shape).extend({
  policy: z.enum(['oracle', 'random', 'model']).default('oracle'),
  dataset: z.string().min(1).default('builtin'),
  split: SplitName.optional(),
  episodes: episodesFlag.default(50),
  /** Play every selected question this many times, each with its own seed (pass@k needs k samples of a question). */
  seeds: seedsFlag.default(1),
  seed: intFlag.default(0),
  concurrency: positiveIntFlag.default(8),
  url: z.string().url().optional(),
  /** In-process environments only (with --url the server's --mode decides): eval shows the agent the terminal reward only. */
  mode: z.enum(['eval', 'train']).default('eval'),
  json: z.boolean().default(false),
  failures: z.coerce.number().int().nonnegative().default(10),
  trajectories: z.string().min(1).optional(),
  verbose: z.boolean().default(false),
  'save-eval': z.string().min(1).optional(),
  'eval-name': z.string().min(1).optional(),
  'eval-version': intFlag.optional(),
  /** Replace an evaluation already saved under --eval-name. */
  force: z.boolean().default(false),
  /** The in-process engine plays the episodes in lockstep: the same command gives the same evaluation every time (docs/inference.md, "Exactness"). Default: with --save-eval. */
  deterministic: z.boolean().default(false),
  'no-deterministic': z.boolean().default(false),
});

/** `sqlenv eval`: play episodes with a baseline policy and print the report. */
export async function evalCommand(argv: string[], io: CommandIo): Promise<number> {
  const { flags } = parseFlags(
    argv,
    {
      policy: { type: 'string' },
      dataset: { type: 'string' },
      split: { type: 'string' },
      episodes: { type: 'string' },
      seeds: { type: 'string' },
      seed: { type: 'string' },
      concurrency: { type: 'string' },
      url: { type: 'string' },
      mode: { type: 'string' },
      json: { type: 'boolean' },
      failures: { type: 'string' },
      trajectories: { type: 'string' },
      verbose: { type: 'boolean' },
      'save-eval': { type: 'string' },
      'eval-name': { type: 'string' },
      'eval-version': { type: 'string' },
      force: { type: 'boolean' },
      deterministic: { type: 'boolean' },
      'no-deterministic': { type: 'boolean' },
      ...modelFlagOptions,
      ...datasetFlagOptions,
    },
    EvalFlags,
    { env: io.env ?? {} },
  );
  const save = saveEvalTarget(flags);
  const deterministic = deterministicOf(flags, save !== undefined);
  if (save !== undefined) {
    // Before any episode is played: an existing evaluation of that name is kept unless --force.
    const { checkSavedEvalTarget } = await import('@sqlenv/runs');
    checkSavedEvalTarget(save.runDir, save.name, { force: flags.force });
  }
  const execution = await startExecution(flags, io.env ?? {}, io.logger ?? silentLogger, flags.policy === 'model' && flags.inferenceUrl === undefined);
  // Evaluation by default: the progress shaping scores queries against the gold rows, so a policy that saw it could probe answers.
  const runtime = await openSqlRuntime({ dataset: flags.dataset, env: { rewardMode: flags.mode } }, flags['skip-missing-dbs'] === true, io);
  let model: ModelResources | undefined;
  const trajectories = flags.trajectories === undefined ? undefined : createWriteStream(flags.trajectories);
  try {
    const dataset = runtime.dataset;
    const drawn = selectQuestionIds(dataset, { split: flags.split, episodes: flags.episodes, seed: flags.seed });
    if (drawn.length * flags.seeds > MAX_EPISODES) {
      throw new UsageError(`${drawn.length} questions × --seeds ${flags.seeds} = ${drawn.length * flags.seeds} episodes, more than the ${MAX_EPISODES.toLocaleString('en-US')} one evaluation plays: lower --episodes or --seeds`);
    }
    // Every question once per seed, as sqlenv train's held-out evaluation plays them: episode i resets with seed + i.
    const questionIds = Array.from({ length: flags.seeds }, () => drawn).flat();
    let policy: Policy;
    if (flags.policy === 'model') {
      model = await startModelPolicy(flags, { maxBatchSize: flags.concurrency, logger: io.logger ?? silentLogger, execution, deterministic });
      policy = model.policy;
    } else {
      policy = createBaselinePolicy(flags.policy, dataset, flags.seed);
    }
    const sampling = model?.sampling ?? null;
    const transcripts = save === undefined ? undefined : new TranscriptCollector();
    const bar = new PhaseProgress(`eval ${policy.name}`, io.stderr, progressMode('auto', io.stderr));
    let successes = 0;
    const createEnvironment = flags.url === undefined
      ? () => runtime.createEnvironment()
      : () => SQLEnvClient.connect(flags.url as string);
    const report = await evaluate(createEnvironment, policy, {
      questionIds,
      seed: flags.seed,
      concurrency: flags.concurrency,
      ...(save === undefined ? {} : { policyVersion: save.version }),
      onProgress: (done, total, record) => {
        if (record.success) successes += 1;
        bar.update(done, total, ` · success ${((100 * successes) / done).toFixed(1)}%`);
        if (trajectories !== undefined) {
          const trajectory = recordTrajectory(record, { runId: 'eval', policy: policy.name, sampling });
          if (trajectory !== undefined) trajectories.write(`${JSON.stringify(trajectory)}\n`);
        }
      },
      ...(flags.verbose || transcripts !== undefined
        ? {
            onTurn: (index: number, event: TurnEvent) => {
              transcripts?.onTurn(index, event);
              if (flags.verbose) io.stderr.write(formatTurn(event, `episode ${index}`));
            },
          }
        : {}),
    });
    bar.finish();
    if (save !== undefined && transcripts !== undefined) {
      const { savedEvalFromReport, writeSavedEval } = await import('@sqlenv/runs');
      const saved = savedEvalFromReport(report, transcripts, {
        name: save.name,
        version: save.version,
        dataset: flags.dataset,
        split: flags.split ?? dataset.defaultSplit,
        seeds: [flags.seed],
        questionText: (id) => dataset.question(id)?.question_text,
      });
      io.stderr.write(`saved ${writeSavedEval(save.runDir, saved, { force: flags.force })} (policy version ${save.version})\n`);
    }
    const engine = model?.engine?.stats;
    if (flags.json) {
      io.stdout.write(`${JSON.stringify({ ...summaryJson(report, flags.dataset, dataset, rewardModeOf(flags)), ...(engine === undefined ? {} : { mean_batch_size: round(engine.meanBatchSize) }) })}\n`);
    } else {
      io.stdout.write(renderReport(report, dataset, flags.failures, rewardModeOf(flags)));
      if (engine !== undefined) io.stdout.write(`  mean batch     ${engine.meanBatchSize.toFixed(2)} turns per decode step (${engine.runs} runs)\n`);
    }
    return evalExitCode(report, io.stderr);
  } finally {
    if (trajectories !== undefined) await new Promise<void>((resolve) => trajectories.end(resolve));
    await model?.close();
    await runtime.close();
  }
}

/**
 * Where `--save-eval` writes: RUN_DIR/evals/NAME.json, for policy version N (`--eval-version`; else
 * read from an adapter directory named v<N>, as a run directory's adapters/v<N>/ are; else 0, the
 * base policy).
 */
function saveEvalTarget(flags: z.infer<typeof EvalFlags>): { runDir: string; name: string; version: number } | undefined {
  if (flags['save-eval'] === undefined) {
    if (flags['eval-name'] !== undefined || flags['eval-version'] !== undefined) throw new UsageError('--eval-name and --eval-version go with --save-eval RUN_DIR');
    return undefined;
  }
  const name = flags['eval-name'];
  if (name === undefined) throw new UsageError('--save-eval RUN_DIR needs --eval-name NAME (e.g. before, after)');
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(name)) throw new UsageError(`--eval-name ${name}: letters, digits, '.', '_' and '-' only`);
  const fromAdapter = flags.adapter === undefined ? undefined : /(?:^|[/\\])v(\d+)[/\\]?$/.exec(flags.adapter)?.[1];
  const version = flags['eval-version'] ?? (fromAdapter === undefined ? 0 : Number(fromAdapter));
  return { runDir: flags['save-eval'], name, version };
}

/**
 * Whether the in-process engine plays in lockstep: --deterministic, else not with --no-deterministic,
 * else exactly when the evaluation is saved (a saved evaluation is compared with others, and lockstep
 * costs no throughput beyond the noise: bench/results/deterministic.md) and sampled in process.
 */
function deterministicOf(flags: z.infer<typeof EvalFlags>, saving: boolean): boolean {
  if (flags.deterministic && flags['no-deterministic']) throw new UsageError('--deterministic and --no-deterministic: give one of the two');
  if (flags.deterministic && flags.inferenceUrl !== undefined) throw new UsageError(DETERMINISTIC_REMOTE);
  if (flags.deterministic || flags['no-deterministic']) return flags.deterministic;
  return saving && flags.inferenceUrl === undefined;
}

/**
 * 0, or 1 when every episode ended in an error (a broken model, adapter or environment): 0 %
 * success with exit 0 would read as a policy that plays badly. Says how many and the first error.
 */
export function evalExitCode(report: EvaluationReport, stderr: Pick<NodeJS.WritableStream, 'write'>): number {
  if (report.episodes === 0 || report.errors < report.episodes) return 0;
  const first = report.records.find((r) => r.error !== null && r.error !== undefined)?.error ?? 'unknown';
  stderr.write(`sqlenv eval: all ${report.episodes} episodes ended in an error; the first: ${first}\n`);
  return 1;
}

function summaryJson(report: EvaluationReport, datasetFlag: string, dataset: Dataset, rewardMode: string): Record<string, unknown> {
  return {
    policy: report.policy,
    dataset: datasetFlag,
    reward_mode: rewardMode,
    episodes: report.episodes,
    success_rate: round(report.success_rate),
    success_rate_precision: round(precisionSuccessRate(report.records, dataset)),
    mean_reward: round(report.mean_reward),
    mean_steps: round(report.mean_steps),
    errors: report.errors,
    format_error_rate: round(report.format_error_rate),
    mean_tokens: round(report.mean_tokens),
    mean_generated_tokens: round(report.mean_generated_tokens),
    gold_rows_rate: report.gold_rows_rate === null ? null : round(report.gold_rows_rate),
    answer_given_gold_rows: report.answer_given_gold_rows === null ? null : round(report.answer_given_gold_rows),
    questions: report.questions,
    pass_at_k: Object.fromEntries(Object.entries(report.pass_at_k).map(([k, v]) => [k, v === null ? null : round(v)])),
    failures: report.records
      .filter((r) => !r.success)
      .slice(0, 50)
      .map((r) => ({ question_id: r.question_id, reason: r.error ?? r.done_reason, reward: round(r.reward) })),
  };
}

/** `eval`/`train` in process; with --url the server decides and the report says so. */
function rewardModeOf(flags: { url?: string | undefined; mode: string }): string {
  return flags.url === undefined ? flags.mode : 'server';
}

function renderReport(report: EvaluationReport, dataset: Dataset, maxFailures: number, rewardMode: string): string {
  const lines = [
    '',
    `Evaluation of the ${report.policy} policy on ${dataset.name} (${report.episodes} episodes)`,
    `  success rate   ${(100 * report.success_rate).toFixed(1)} %`,
    `  success (precise floats) ${(100 * precisionSuccessRate(report.records, dataset)).toFixed(1)} %`,
    `  mean reward    ${report.mean_reward.toFixed(3)} (${rewardMode === 'eval' ? 'terminal reward only' : rewardMode === 'train' ? 'shaped' : "the server's --mode"})`,
    `  mean steps     ${report.mean_steps.toFixed(2)}`,
    `  errors         ${report.errors}`,
  ];
  if (report.gold_rows_rate !== null) {
    lines.push(
      `  gold rows      ${(100 * report.gold_rows_rate).toFixed(1)} % of episodes ended with the gold rows as the last query's result` +
        (report.answer_given_gold_rows === null ? '' : `; ${(100 * report.answer_given_gold_rows).toFixed(1)} % of those answered correctly`),
    );
  }
  lines.push(`  pass@k         ${passAtKText(report)}`);
  if (report.mean_tokens > 0) {
    lines.push(`  format errors  ${(100 * report.format_error_rate).toFixed(1)} % of turns`);
    lines.push(`  tokens/episode ${report.mean_tokens.toFixed(0)} (${report.mean_generated_tokens.toFixed(0)} written by the model)`);
  }
  const failed = report.records.filter((r) => !r.success);
  if (failed.length > 0 && maxFailures > 0) {
    lines.push(`  failed episodes (first ${Math.min(maxFailures, failed.length)} of ${failed.length}):`);
    for (const record of failed.slice(0, maxFailures)) {
      const last = record.actions.at(-1);
      const reason = record.error ?? (record.done_reason === 'answered' ? `wrong answer ${JSON.stringify(last?.argument ?? '').slice(0, 60)}` : record.done_reason ?? 'unknown');
      lines.push(`    ${record.question_id ?? '?'}: ${reason}`);
    }
  }
  return `${lines.join('\n')}\n`;
}

/** "pass@1 14.0 %, pass@4 22.1 %, pass@8 — (60 questions × 1–8 samples; — : fewer than k samples of some question)". */
function passAtKText(report: EvaluationReport): string {
  const perQuestion = new Map<string, number>();
  for (const r of report.records) {
    const key = r.question_id ?? `episode ${r.index}`;
    perQuestion.set(key, (perQuestion.get(key) ?? 0) + 1);
  }
  const counts = [...perQuestion.values()];
  if (counts.length === 0) return 'no episodes';
  const low = minOf(counts);
  const high = maxOf(counts);
  const values = Object.entries(report.pass_at_k).map(([k, v]) => `pass@${k} ${v === null ? '—' : `${(100 * v).toFixed(1)} %`}`);
  const missing = Object.values(report.pass_at_k).some((v) => v === null);
  return `${values.join(', ')} (${report.questions} questions × ${low === high ? low : `${low}–${high}`} samples${missing ? '; — : some question has fewer than k, see --seeds' : ''})`;
}

function round(value: number): number {
  return Math.round(value * 10_000) / 10_000;
}
