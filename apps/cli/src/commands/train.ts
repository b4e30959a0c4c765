import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import type { BatchStats, RolloutRunSpec } from '@sqlenv/protocol';
import { planLearner, RunInterrupted, runtimeOptionsFrom, runTraining, sparkline, type ResumeFrom, type RunSummary } from '@sqlenv/rollout';
import { claimRunDir, pairedDifferenceOf, passAtKOf, readResumePoint, RUN_SPEC_FILE, savedEvalPath, successInterval, writeRunCommand, type RunDirClaim, type SavedEval } from '@sqlenv/runs';
import { createRootLogger, progressMode, silentLogger, maxOf, minOf } from '@sqlenv/shared';
import { runtimeOptionSpecs, RuntimeOptionsSchema, transportConfig, transportOptionSpecs, TransportOptionsSchema } from './transport-options.ts';
import { booleanText, MAX_EPISODES, printUsage, parseFlags, seedsFlag, wantsHelp, type FlagSpec } from '../flags.ts';
import { reportCommandError, type CommandIo } from '../io.ts';
import { UsageError } from '../cli-error.ts';
import { claimModeOf, reportInterrupted, resumedOptions, savedOptionsOf } from '../run-dir-flags.ts';
import { runSpecFrom, SpecOptionsSchema, specOptionSpecs } from './spec-options.ts';
import { ModelDirOptionsSchema, modelDirOptionSpecs, ModelSpecOptionsSchema, modelSpecOptionSpecs, runModelSpec } from './model-options.ts';
import { checkExecutionProvider, ExecutionOptionsSchema, executionOptionSpecs, modelExecutionOf } from './execution-options.ts';
import { trainUsage } from './usage.ts';
import { AdapterShareOptionsSchema, adapterShareOptionSpecs, checkAdapterShare, InferenceOptionsSchema, inferenceOptionSpecs, startRemoteInference } from './inference-options.ts';

const trainOptionSpecs: Record<string, FlagSpec> = {
  concurrency: { key: 'concurrency', env: 'SQLENV_CONCURRENCY' },
  json: { key: 'json', type: 'boolean' },
  'metrics-port': { key: 'metricsPort', env: 'METRICS_PORT' },
  'log-level': { key: 'logLevel', env: 'LOG_LEVEL' },
  'keep-weights': { key: 'keepWeights', env: 'SQLENV_KEEP_WEIGHTS' },
  'run-dir': { key: 'runDir', env: 'SQLENV_RUN_DIR' },
  'save-every': { key: 'saveEvery', env: 'SQLENV_SAVE_EVERY' },
  'eval-episodes': { key: 'evalEpisodes', env: 'SQLENV_EVAL_EPISODES' },
  'eval-split': { key: 'evalSplit', env: 'SQLENV_EVAL_SPLIT' },
  'eval-seed': { key: 'evalSeed', env: 'SQLENV_EVAL_SEED' },
  'eval-seeds': { key: 'evalSeeds', env: 'SQLENV_EVAL_SEEDS' },
  'eval-temperature': { key: 'evalTemperature', env: 'SQLENV_EVAL_TEMPERATURE' },
  'local-worker': { key: 'localWorker', env: 'SQLENV_LOCAL_WORKER' },
  progress: { key: 'progress', env: 'SQLENV_PROGRESS' },
  resume: { key: 'resume', type: 'boolean' },
  force: { key: 'force', type: 'boolean' },
  deterministic: { key: 'deterministic', type: 'boolean' },
  redis: transportOptionSpecs.redis as FlagSpec,
  'key-base': transportOptionSpecs['key-base'] as FlagSpec,
};

/**
 * The embedded run's own defaults (a short demo on the built-in dataset);
 * everything else defaults in RolloutRunSpecSchema. The random policy gives
 * groups reward variance, so batches train; the oracle's groups are all
 * equal and would all be dropped as zero-variance.
 */
export const TrainOptionsSchema = SpecOptionsSchema.extend({
  episodes: z.coerce.number().int().positive().max(MAX_EPISODES, 'a bound no run needs: split larger work into several runs').default(256),
  policy: z.string().default('random'),
  /** Episodes in flight at once. */
  concurrency: z.coerce.number().int().positive().default(8),
  json: booleanText.default(false),
  metricsPort: TransportOptionsSchema.shape.metricsPort,
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('warn'),
  /** Committed weights kept in memory: the newest K versions. */
  keepWeights: z.coerce.number().int().positive().default(3),
  /** The run directory (metrics.jsonl, evals/, adapters/, report.html); default runs/<run id> under the current directory. */
  runDir: z.string().min(1).optional(),
  /** Save the adapter of every N-th version too (0 = only the final one). */
  saveEvery: z.coerce.number().int().nonnegative().default(0),
  /** Held-out evaluation before and after training ('before' and 'after' in evals/): N questions, all of the split, or 0 for none. */
  evalEpisodes: z.union([z.literal('all'), z.coerce.number().int().nonnegative()]).default(0),
  evalSplit: z.enum(['train', 'dev']).default('dev'),
  /** Episode i of an evaluation resets with eval seed + i (the same in both evaluations). */
  evalSeed: z.coerce.number().int().nonnegative().default(0),
  /** Play every evaluation question this many times, each with its own seed (sampling needs it; greedy repeats itself). */
  evalSeeds: seedsFlag.default(1),
  /** Sampling temperature of the held-out evaluations (0 = greedy, the default; the run's own temperature is --temperature). */
  evalTemperature: z.coerce.number().nonnegative().default(0),
  /**
   * Redis instead of the in-process transport: the same run, with its jobs, trajectories and weights
   * in Redis, so \`sqlenv worker --redis URL\` processes anywhere play its episodes beside (or instead
   * of, with --local-worker false) this process's own worker.
   */
  redisUrl: TransportOptionsSchema.shape.redisUrl,
  keyBase: TransportOptionsSchema.shape.keyBase,
  localWorker: booleanText.default(true),
  /**
   * Progress on stderr: bar (redrawn in place), lines (one line per tenth of a phase, for logs and
   * pipes), off; auto = bar on a terminal, off otherwise (and with --json).
   */
  progress: z.enum(['auto', 'bar', 'lines', 'off']).default('auto'),
  /** Continue the interrupted run in --run-dir (its saved settings; only where and how it runs may change). */
  resume: booleanText.default(false),
  /** Replace what --run-dir holds (the new run directory is made before the old one is removed). */
  force: booleanText.default(false),
  /** The held-out evaluations in lockstep on their own engine: the same run gives the same evaluations (docs/inference.md, "Exactness"). */
  deterministic: booleanText.default(false),
})
  .extend(RuntimeOptionsSchema.shape)
  .extend(ModelDirOptionsSchema.shape)
  .extend(ModelSpecOptionsSchema.shape)
  .extend(ExecutionOptionsSchema.shape)
  .extend(InferenceOptionsSchema.shape)
  .extend(AdapterShareOptionsSchema.shape);

export type TrainOptions = z.infer<typeof TrainOptionsSchema>;
export type TrainOptionsInput = z.input<typeof TrainOptionsSchema>;

/** Every flag of `sqlenv train`, with its environment variable and its key in TrainOptions. */
export const trainFlagSpecs: Record<string, FlagSpec> = { ...specOptionSpecs, ...trainOptionSpecs, ...runtimeOptionSpecs, ...modelDirOptionSpecs, ...modelSpecOptionSpecs, ...executionOptionSpecs, ...inferenceOptionSpecs, ...adapterShareOptionSpecs };

/**
 * `sqlenv train`: coordinator, worker and trainer in one process on the
 * in-process transport (no Redis). A progress bar on a TTY stderr, a readable
 * summary at the end (`--json`: the RunSummary as one JSON line).
 */
export async function trainCommand(argv: readonly string[], io: CommandIo): Promise<number> {
  if (wantsHelp(argv)) return printUsage(io, trainUsage);
  try {
    const { flags, given } = parseFlags(argv, trainFlagSpecs, TrainOptionsSchema, { env: io.env ?? {} });
    if (!flags.resume) return await train(flags, io);
    if (flags.runDir === undefined) throw new UsageError('--resume needs --run-dir: the run directory of the run to continue');
    claimModeOf(flags);
    const claim = claimRunDir(flags.runDir, { mode: 'resume', command: 'train', label: '--run-dir' });
    try {
      const saved = claim.resumed as NonNullable<RunDirClaim['resumed']>;
      const flagOf = new Map(Object.entries(trainFlagSpecs).map(([flag, spec]) => [spec.key ?? flag, `--${flag}`]));
      const options = TrainOptionsSchema.parse(resumedOptions(saved, flags, given, RESUME_MAY_CHANGE, (key) => flagOf.get(key) ?? key));
      return await train({ ...options, runDir: flags.runDir, resume: true }, io, { claim, resume: true });
    } finally {
      claim.release();
    }
  } catch (error) {
    return reportCommandError(io, 'train', error);
  }
}

/** What a resumed run may run with differently from its first part: where and how, never what it computes. */
export const RESUME_MAY_CHANGE: ReadonlySet<string> = new Set(['executionProvider', 'deviceId', 'threads', 'cpuArena', 'logLevel', 'progress', 'json', 'metricsPort', 'redisUrl', 'keyBase', 'localWorker', 'concurrency', 'inferenceUrl', 'inferenceApiKey', 'inferenceConcurrency', 'adapterShare', 'cacheDir', 'executors']);

/** How a caller that owns the run directory (sqlenv learn, a resumed train) hands it over. */
export interface TrainContext {
  /** The run directory, already claimed: train neither claims it nor writes command.json. */
  claim?: RunDirClaim;
  /** Continue the run in it from its checkpoint. */
  resume?: boolean;
  /** The command a message tells to run to continue an interrupted run (default: sqlenv train). */
  command?: string;
}

/** A finished `train`: its exit code, and the held-out evaluations of this run. */
export interface TrainOutcome {
  code: number;
  runId: string;
  evals: SavedEval[];
}

/**
 * The run spec a `sqlenv train` with these options runs (model fingerprinted, reward and learner
 * settings validated); throws a VALIDATION AppError naming what is wrong. Nothing is written.
 */
export async function trainRunSpec(options: TrainOptions): Promise<RolloutRunSpec> {
  const spec = runSpecFrom(options, () => `train-${randomBytes(3).toString('hex')}`, await runModelSpec(options.policy, options));
  // The learner sized to the memory limit now, before anything is loaded: one that cannot fit is refused (exit 2) with the estimate.
  if (spec.model !== undefined && options.modelDir !== undefined) await planLearner(spec.model, options.modelDir, options.tisCap === undefined ? {} : { tisCap: options.tisCap });
  return spec;
}

/**
 * A training run from its options (runTraining does the run), printed as `sqlenv train` prints it.
 * Exit code 1 when the finished run failed loudly (runProblems), 130/143 when a signal stopped it
 * (its work kept); errors are thrown.
 */
export async function train(options: TrainOptions, io: CommandIo, context: TrainContext = {}): Promise<number> {
  return (await trainRun(options, io, context)).code;
}

/** train, returning the run's evaluations too (sqlenv learn computes its result from them). */
export async function trainRun(options: TrainOptions, io: CommandIo, context: TrainContext = {}): Promise<TrainOutcome> {
  const spec = await trainRunSpec(options);
  const logger = io.logger ?? (options.logLevel === 'silent' ? silentLogger : createRootLogger('train', { fd: 2, level: options.logLevel }));
  const execution = modelExecutionOf(options);
  const runDir = options.runDir ?? join('runs', spec.run_id);
  // Asked for a GPU: refuse at once, with the reason, when it cannot run (never train on the CPU instead).
  if (execution.provider !== 'cpu') await checkExecutionProvider(execution, io.env ?? {}, logger);
  await checkAdapterShare(options);
  // The run directory is this run's before anything is written or loaded (a second run is refused here).
  const claim = context.claim ?? claimRunDir(runDir, { mode: claimModeOf(options), command: 'train', label: '--run-dir' });
  try {
    const resume = context.resume === true ? resumePointOf(runDir, spec.run_id) : undefined;
    if (context.claim === undefined) writeRunCommand(runDir, 'train', spec.run_id, savedOptionsOf({ ...options, run_id: spec.run_id }));
    const remote = await startRemoteInference(options, { training: spec.policy === 'model', ...(spec.model === undefined ? {} : { sampling: { topP: spec.model.sampling.top_p, topK: spec.model.sampling.top_k } }), logger });
    let run: Awaited<ReturnType<typeof runTraining>>;
    try {
      run = await runTraining(spec, {
        ...(remote === undefined ? {} : { remote }),
        ...(options.adapterShare === undefined ? {} : { adapterShare: options.adapterShare }),
        runDir,
        saveEvery: options.saveEvery,
        keepWeights: options.keepWeights,
        concurrency: options.concurrency,
        ...(options.redisUrl === undefined ? {} : { redis: transportConfig(options) }),
        localWorker: options.localWorker,
        ...(options.evalEpisodes === 0 ? {} : { heldOut: { episodes: options.evalEpisodes, split: options.evalSplit, seed: options.evalSeed, seeds: options.evalSeeds, temperature: options.evalTemperature, deterministic: options.deterministic } }),
        ...(options.metricsPort === undefined ? {} : { metricsPort: options.metricsPort }),
        ...(options.modelDir === undefined ? {} : { modelDir: options.modelDir }),
        ...(resume === undefined ? {} : { resume }),
        execution,
        runtime: runtimeOptionsFrom(options, logger),
        logger,
        ...(io.signal ? { signal: io.signal } : {}),
        progress: { stream: io.stderr, mode: progressMode(options.json && options.progress === 'auto' ? 'off' : options.progress, io.stderr) },
      });
    } catch (error) {
      if (!(error instanceof RunInterrupted)) throw error;
      return { code: reportInterrupted(io, context.command ?? 'train', runDir, error), runId: spec.run_id, evals: [] };
    }
    const { summary, batches, report, adapters, evals } = run;
    const evalJson = Object.fromEntries(evals.map((x) => [x.name, { version: x.version, episodes: x.episodes_count, success_rate: x.success_rate, mean_reward: x.mean_reward, pass_at_k: passAtKOf(x) }]));
    const paired = pairedJson(evals);
    if (options.json) io.stdout.write(`${JSON.stringify({ ...summary, run_dir: runDir, report, adapters, evals: evalJson, ...(paired === undefined ? {} : { paired }) })}\n`);
    else io.stdout.write(`${formatSummary(summary, batches)}${formatRunDir(runDir, report, adapters, evals)}`);
    return { code: runHealth(io, run.nonFiniteVersions, evals), runId: spec.run_id, evals };
  } finally {
    if (context.claim === undefined) claim.release();
  }
}

/**
 * Where a resumed run continues: its checkpoint (written when a signal stopped it). A run killed
 * without one (SIGKILL, a crash) cannot be continued; a finished one has nothing left.
 */
function resumePointOf(runDir: string, runId: string): ResumeFrom {
  const saved = readResumePoint(runDir);
  if (saved === undefined) {
    const finished = existsSync(join(runDir, RUN_SPEC_FILE)) && existsSync(savedEvalPath(runDir, 'after'));
    throw new UsageError(
      finished
        ? `--resume: the run in ${runDir} finished; nothing is left to continue`
        : `--resume: ${runDir} has no checkpoint/resume.json (a run stopped by SIGINT or SIGTERM writes one; one killed outright does not): it cannot be continued; --force replaces it`,
    );
  }
  if (saved.point.run_id !== runId) throw new UsageError(`--resume: the checkpoint in ${runDir} is of run ${saved.point.run_id}, not ${runId}`);
  return { version: saved.point.version, episodesDone: saved.point.episodes_done, parts: saved.parts };
}

/** The `sqlenv train` command line of these options (what `sqlenv learn` says it runs, so it can be run alone). */
export function trainCommandLine(input: TrainOptionsInput): string {
  const flagOf = new Map(Object.entries(trainFlagSpecs).map(([flag, spec]) => [spec.key ?? flag, flag]));
  const args = Object.entries(input).flatMap(([key, value]) => {
    const flag = flagOf.get(key) ?? key;
    if (value === undefined || value === false) return [];
    // A key is never printed: the line goes to logs. The environment variable stands in for it.
    if (key === 'inferenceApiKey') return [];
    return trainFlagSpecs[flag]?.type === 'boolean' ? [`--${flag}`] : [`--${flag}`, String(value)];
  });
  return `sqlenv train ${args.join(' ')}`;
}

function formatRunDir(runDir: string, report: string, adapters: readonly number[], evals: readonly SavedEval[]): string {
  const lines = evals.map((x) => {
    const [low, high] = successInterval(x).ci95;
    return `  ${`eval ${x.name}`.padEnd(9)} v${x.version}: success ${(x.success_rate * 100).toFixed(1)} % (95 % CI ${(low * 100).toFixed(1)}–${(high * 100).toFixed(1)} %) of ${x.episodes_count}, reward ${x.mean_reward.toFixed(3)}, format errors ${(x.format_error_rate * 100).toFixed(1)} %${goldRows(x)}${passAtKText(x)}`;
  });
  const paired = pairedJson(evals);
  if (paired !== undefined) {
    const points = (x: number): string => `${x >= 0 ? '+' : '−'}${Math.abs(100 * x).toFixed(1)}`;
    lines.push(
      `  paired    after − before ${points(paired.diff)} points (95 % CI ${points(paired.diff_ci95[0])} … ${points(paired.diff_ci95[1])}, bootstrap over ${paired.questions} questions, ${paired.episodes} episode pairs): ${paired.improved ? 'improved' : 'not improved'}`,
    );
  }
  lines.push(`  run dir   ${runDir} (metrics.jsonl${adapters.length > 0 ? `, adapters ${adapters.map((v) => `v${v}`).join(' ')}` : ''}${evals.length > 0 ? ', evals/' : ''})`);
  lines.push(`  report    ${report}`);
  return `${lines.join('\n')}\n`;
}

/** ", gold rows 36.7 % (50.0 % of them answered right)" for a saved evaluation that has the counts. */
function goldRows(x: SavedEval): string {
  if (x.gold_rows_rate === undefined || x.gold_rows_rate === null) return '';
  const answered = x.answer_given_gold_rows === null || x.answer_given_gold_rows === undefined ? '' : ` (${(x.answer_given_gold_rows * 100).toFixed(1)} % of them answered right)`;
  return `, gold rows ${(x.gold_rows_rate * 100).toFixed(1)} %${answered}`;
}

/** ", pass@1/4/8 14.0/22.1/26.7 %" (— where a question had fewer than k episodes). */
function passAtKText(x: SavedEval): string {
  const entries = Object.entries(passAtKOf(x));
  if (entries.length === 0) return '';
  return `, pass@${entries.map(([k]) => k).join('/')} ${entries.map(([, v]) => (v === null ? '—' : (v * 100).toFixed(1))).join('/')} %`;
}

/** The paired before/after test of a run with both held-out evaluations (undefined otherwise). */
interface PairedJson {
  /** Success after − before over the episode pairs (same question, same seed). */
  diff: number;
  /** 95 % paired-bootstrap interval of diff over questions. */
  diff_ci95: [number, number];
  /** diff_ci95's lower end above 0: after beats before with 95 % confidence. */
  improved: boolean;
  questions: number;
  episodes: number;
}

function pairedJson(evals: readonly SavedEval[]): PairedJson | undefined {
  const before = evals.find((e) => e.name === 'before');
  const after = evals.find((e) => e.name === 'after');
  if (before === undefined || after === undefined) return undefined;
  const paired = pairedDifferenceOf(before, after);
  if (paired === null) return undefined;
  return { diff: paired.diff, diff_ci95: paired.ci, improved: paired.ci[0] > 0, questions: paired.questions, episodes: paired.episodes };
}

/**
 * What makes a finished run fail loudly (exit code 1, after its report is written so it can be read):
 * non-finite learner numbers, or a policy that collapsed (every step of the 'after' evaluation a
 * format error, when 'before' had valid tool calls).
 */
export function runProblems(nonFiniteVersions: readonly number[], evals: readonly Pick<SavedEval, 'name' | 'episodes_count' | 'format_error_rate'>[]): string[] {
  const problems: string[] = [];
  if (nonFiniteVersions.length > 0) problems.push(`the learner reported NaN or infinite numbers at version(s) ${nonFiniteVersions.join(', ')}`);
  const before = evals.find((e) => e.name === 'before');
  const after = evals.find((e) => e.name === 'after');
  if (before !== undefined && after !== undefined && after.episodes_count > 0 && after.format_error_rate >= 1 && before.format_error_rate < 1) {
    problems.push(`the policy collapsed: format errors went from ${(100 * before.format_error_rate).toFixed(1)} % to 100 % of the steps`);
  }
  return problems;
}

function runHealth(io: Pick<CommandIo, 'stderr'>, nonFiniteVersions: readonly number[], evals: readonly SavedEval[]): number {
  const problems = runProblems(nonFiniteVersions, evals);
  for (const problem of problems) io.stderr.write(`sqlenv train: ${problem}\n`);
  return problems.length > 0 ? 1 : 0;
}

/** The end-of-run report: numbers, then reward and success curves over the trained batches. */
export function formatSummary(summary: RunSummary, batches: readonly BatchStats[]): string {
  const pct = (x: number | null): string => (x === null ? '—' : `${(x * 100).toFixed(1)} %`);
  const num = (x: number | null): string => (x === null ? '—' : x.toFixed(3));
  const lines = [
    `Run ${summary.run_id} (${summary.policy} policy on ${summary.dataset}, ${summary.transport}) finished in ${summary.elapsed_s.toFixed(1)} s — ${summary.episodes_per_s.toFixed(1)} episodes/s`,
    `  episodes  ${summary.episodes_completed} completed, ${summary.episodes_failed} failed, ${summary.episodes_consumed} consumed by the trainer (${summary.lost_episodes} lost, ${summary.duplicate_trajectories} duplicated)`,
    `  groups    ${summary.groups_admitted} admitted: ${summary.groups_trained} trained, ${summary.groups_dropped} dropped (zero variance), ${summary.groups_failed} failed`,
    `  policy    version ${summary.policy_version} after ${summary.batches} batches of ${summary.groups_per_batch} groups × ${summary.group_size} episodes (max staleness ${summary.max_staleness})`,
    `  trained   reward ${num(summary.reward_mean)}, success ${pct(summary.success_rate)}`,
  ];
  if (batches.length > 1) {
    lines.push(`  reward    ${sparkline(batches.map((b) => b.reward_mean))}  (per batch, ${num(minOf(batches.map((b) => b.reward_mean)))} … ${num(maxOf(batches.map((b) => b.reward_mean)))})`);
    lines.push(`  success   ${sparkline(batches.map((b) => b.success_rate), 0, 1)}  (per batch, 0 … 100 %)`);
  }
  for (const failed of summary.failed_groups.slice(0, 5)) lines.push(`  failed    ${failed.group_id}: ${failed.reason}`);
  return `${lines.join('\n')}\n`;
}
