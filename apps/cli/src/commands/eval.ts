import { createWriteStream } from 'node:fs';
import { z } from 'zod';
import { createBaselinePolicy, evaluate, TranscriptCollector, type EvaluationReport, type Policy, type TurnEvent } from '@sqlenv/agents';
import type { ModelResources } from '@sqlenv/rollout';
import { SplitName } from '@sqlenv/protocol';
import { createSqlEnvRuntime, type Dataset } from '@sqlenv/sql-env';
import { SQLEnvClient } from '@sqlenv/client';
import { PhaseProgress, progressMode } from '@sqlenv/shared';
import { episodesFlag, intFlag, parseFlags, positiveIntFlag } from '../args.ts';
import { cacheDir } from '../paths.ts';
import type { CommandIo } from '../io.ts';
import { selectQuestionIds } from '../select-questions.ts';
import { UsageError } from '../cli-error.ts';
import { formatTurn, ModelFlags, modelFlagOptions, recordTrajectory, startModelPolicy } from '../model-policy.ts';
import { precisionSuccessRate } from '../precision-success-rate.ts';

const EvalFlags = ModelFlags.extend({
  policy: z.enum(['oracle', 'random', 'model']).default('oracle'),
  dataset: z.string().min(1).default('builtin'),
  split: SplitName.optional(),
  episodes: episodesFlag.default(50),
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
});

export const evalUsage = `sqlenv eval [--policy oracle|random|model] [--dataset builtin|<dir>] [--split train|dev]
            [--episodes N|all] [--seed S] [--concurrency C] [--url ws://host:port] [--mode eval|train] [--json] [--verbose]
            [--model DIR [--adapter DIR] [--prompt FILE] [--temperature T] [--top-p P] [--top-k K]
             [--max-new-tokens N] [--context-tokens N] [--thinking] [--trajectories F.jsonl]]
            [--save-eval RUN_DIR --eval-name NAME [--eval-version N]]`;

/** `sqlenv eval`: play episodes with a baseline policy and print the report. */
export async function evalCommand(argv: string[], io: CommandIo): Promise<number> {
  const { flags } = parseFlags(
    'eval',
    argv,
    {
      policy: { type: 'string' },
      dataset: { type: 'string' },
      split: { type: 'string' },
      episodes: { type: 'string' },
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
      ...modelFlagOptions,
    },
    EvalFlags,
  );
  const save = saveEvalTarget(flags);
  // Evaluation by default: the progress shaping scores queries against the gold rows, so a policy that saw it could probe answers.
  const runtime = await createSqlEnvRuntime({ dataset: flags.dataset, cacheDir: cacheDir(), env: { rewardMode: flags.mode }, logger: io.logger });
  let model: ModelResources | undefined;
  const trajectories = flags.trajectories === undefined ? undefined : createWriteStream(flags.trajectories);
  try {
    const dataset = runtime.dataset;
    const questionIds = selectQuestionIds(dataset, { split: flags.split, episodes: flags.episodes, seed: flags.seed });
    let policy: Policy;
    if (flags.policy === 'model') {
      model = await startModelPolicy(flags, { maxBatchSize: flags.concurrency, logger: io.logger });
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
      const { savedEvalFromReport, writeSavedEval } = await import('@sqlenv/rollout');
      const saved = savedEvalFromReport(report, transcripts, {
        name: save.name,
        version: save.version,
        dataset: flags.dataset,
        split: flags.split ?? dataset.defaultSplit,
        seeds: [flags.seed],
        questionText: (id) => dataset.question(id)?.question_text,
      });
      io.stderr.write(`saved ${writeSavedEval(save.runDir, saved)} (policy version ${save.version})\n`);
    }
    const engine = model?.engine.stats;
    if (flags.json) {
      io.stdout.write(`${JSON.stringify({ ...summaryJson(report, flags.dataset, dataset, rewardModeOf(flags)), ...(engine === undefined ? {} : { mean_batch_size: round(engine.meanBatchSize) }) })}\n`);
    } else {
      io.stdout.write(renderReport(report, dataset, flags.failures, rewardModeOf(flags)));
      if (engine !== undefined) io.stdout.write(`  mean batch     ${engine.meanBatchSize.toFixed(2)} turns per decode step (${engine.runs} runs)\n`);
    }
    return 0;
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

function round(value: number): number {
  return Math.round(value * 10_000) / 10_000;
}
