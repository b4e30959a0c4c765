import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { z } from 'zod';
import { drawQuestionIds } from '@sqlenv/agents';
import type { RolloutRunSpec, BatchStats } from '@sqlenv/protocol';
import { AppError, createRootLogger, ErrorCode, PhaseProgress, progressMode, silentLogger, type ProgressMode, maxOf, minOf } from '@sqlenv/shared';
import type { SqlEnvRuntime } from '@sqlenv/sql-env';
import { runCoordinator, type RunSummary } from '../coordinator.ts';
import { RolloutMetrics } from '../metrics.ts';
import { RolloutWorker } from '../rollout-worker.ts';
import { startStatusServer, type StatusServer } from '../status-server.ts';
import { policyUpdaterFor, type ClosablePolicyUpdater } from '../grpo-updater.ts';
import { runTrainer } from '../trainer.ts';
import { RunRecorder, evaluateIntoRunDir, writeRunReport, writeRunSpec, pairedDifferenceOf, passAtKOf, successInterval, type SavedEval } from '@sqlenv/runs';
import type { ResolveRun } from '../rollout-worker.ts';
import { InProcessTransport } from '../transport/in-process-transport.ts';
import { BullmqTransport } from '../transport/bullmq-transport.ts';
import type { Transport } from '../transport/transport.ts';
import { booleanText, runtimeOptionSpecs, RuntimeOptionsSchema, transportConfig, transportOptionSpecs, TransportOptionsSchema } from './shared-options.ts';
import { printUsage, readOptions, reportCommandError, wantsHelp, type OptionSpec, type RolloutCommandIo } from './command-io.ts';
import { createRunResolver, RuntimeCache, runtimeOptionsFrom, scheduledQuestions } from './run-resources.ts';
import { renderProgress, sparkline } from './progress.ts';
import { runSpecFrom, SpecOptionsSchema, specOptionSpecs } from './spec-options.ts';
import { ModelDirOptionsSchema, modelDirOptionSpecs, ModelSpecOptionsSchema, modelSpecOptionSpecs, runModelSpec } from './model-options.ts';
import { checkExecutionProvider, ExecutionOptionsSchema, executionOptionSpecs, modelExecutionOf } from './execution-provider.ts';

export const trainUsage =
  'sqlenv train [--dataset builtin|DIR [--skip-missing-dbs]] [--policy random|oracle|model] [--model DIR] [--adapter DIR] [--prompt FILE] [--temperature T] [--max-new-tokens N] [--context-tokens N] [--episodes N] [--group-size G] [--groups-per-batch B] [--max-staleness S] [--concurrency C] [--execution-provider cpu|cuda|webgpu] [--threads N] [--run-dir DIR] [--save-every N] [--eval-episodes N|all] [--eval-seeds K] [--eval-temperature T] [--eval-split dev|train] [--eval-seed S] [--redis URL [--local-worker true|false]] [--progress auto|bar|lines|off] [--json]';

const trainOptionSpecs: Record<string, OptionSpec> = {
  concurrency: { key: 'concurrency', env: 'SQLENV_CONCURRENCY' },
  json: { key: 'json', flag: true },
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
  redis: transportOptionSpecs.redis as OptionSpec,
  'key-base': transportOptionSpecs['key-base'] as OptionSpec,
};

/**
 * The embedded run's own defaults (a short demo on the built-in dataset);
 * everything else defaults in RolloutRunSpecSchema. The random policy gives
 * groups reward variance, so batches train; the oracle's groups are all
 * equal and would all be dropped as zero-variance.
 */
const TrainOptionsSchema = SpecOptionsSchema.extend({
  episodes: z.coerce.number().int().positive().default(256),
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
  evalSeeds: z.coerce.number().int().positive().default(1),
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
})
  .extend(RuntimeOptionsSchema.shape)
  .extend(ModelDirOptionsSchema.shape)
  .extend(ModelSpecOptionsSchema.shape)
  .extend(ExecutionOptionsSchema.shape);

/**
 * `sqlenv train`: coordinator, worker and trainer in one process on the
 * in-process transport (no Redis). A progress bar on a TTY stderr, a readable
 * summary at the end (`--json`: the RunSummary as one JSON line).
 */
export async function trainCommand(argv: readonly string[], io: RolloutCommandIo): Promise<number> {
  if (wantsHelp(argv)) return printUsage(io, trainUsage);
  let transport: Transport | undefined;
  let runtimes: RuntimeCache | undefined;
  let worker: RolloutWorker | undefined;
  let server: StatusServer | undefined;
  let progressTimer: NodeJS.Timeout | undefined;
  let updater: ClosablePolicyUpdater | undefined;
  let heldOut: HeldOutEvaluation | undefined;
  try {
    const options = readOptions(argv, io.env ?? {}, { ...specOptionSpecs, ...trainOptionSpecs, ...runtimeOptionSpecs, ...modelDirOptionSpecs, ...modelSpecOptionSpecs, ...executionOptionSpecs }, TrainOptionsSchema);
    const spec = runSpecFrom(options, () => `train-${randomBytes(3).toString('hex')}`, await runModelSpec(options.policy, options));
    const logger = io.logger ?? (options.logLevel === 'silent' ? silentLogger : createRootLogger('train', { fd: 2, level: options.logLevel }));
    const execution = modelExecutionOf(options);
    // Asked for a GPU: refuse at once, with the reason, when it cannot run (never train on the CPU instead).
    if (execution.provider !== 'cpu') await checkExecutionProvider(execution, io.env ?? {}, logger);
    if (options.redisUrl === undefined && !options.localWorker) throw new AppError(ErrorCode.VALIDATION, '--local-worker false needs --redis URL (workers elsewhere play the episodes)');
    transport = options.redisUrl === undefined ? new InProcessTransport() : new BullmqTransport(transportConfig(options), { logger });
    const activeTransport = transport;
    const progress = progressMode(options.json && options.progress === 'auto' ? 'off' : options.progress, io.stderr);
    if (progress !== 'off') io.stderr.write(`Loading dataset ${spec.dataset}…\n`);
    runtimes = new RuntimeCache(runtimeOptionsFrom(options, logger));
    const runtime = await runtimes.get(spec.dataset);
    const questions = scheduledQuestions(runtime.dataset, spec.split);
    const runDir = options.runDir ?? join('runs', spec.run_id);
    const recorder = new RunRecorder({ dir: runDir, runId: spec.run_id, saveEvery: options.saveEvery, ...(spec.model ? { baseModel: options.modelDir ?? spec.model.fingerprint } : {}), logger });
    writeRunSpec(runDir, spec);
    const resolveRun = createRunResolver(runtimes, { ...(options.modelDir === undefined ? {} : { modelDir: options.modelDir }), maxBatchSize: options.concurrency, execution, logger });
    heldOut =
      options.evalEpisodes === 0
        ? undefined
        : new HeldOutEvaluation(
            spec,
            runtime,
            resolveRun,
            { runDir, episodes: options.evalEpisodes, split: options.evalSplit, seed: options.evalSeed, seeds: options.evalSeeds, temperature: options.evalTemperature, concurrency: options.concurrency },
            { stream: io.stderr, mode: progress },
          );
    const evals: SavedEval[] = [];
    if (heldOut) evals.push(await heldOut.run('before', 0, null));
    await transport.registerRun(spec);
    const metrics = new RolloutMetrics();
    if (options.metricsPort !== undefined) {
      server = await startStatusServer({
        port: options.metricsPort,
        host: '127.0.0.1',
        registry: metrics.registry,
        status: async () => ({ app: 'train', run_id: spec.run_id, counters: await activeTransport.counters(spec.run_id) }),
        logger,
      });
    }
    if (options.localWorker) {
      worker = new RolloutWorker({ transport, resolveRun, concurrency: options.concurrency, runId: spec.run_id, workerId: options.redisUrl === undefined ? 'embedded' : `train-${process.pid}`, discoveryMs: 200, logger, metrics });
      await worker.start();
    }
    const batches: BatchStats[] = [];
    const grpoProgress = new PhaseProgress('GRPO', io.stderr, progress);
    // A model run learns (GRPO on the LoRA adapter); oracle and random runs exercise the loop with
    // the statistics-only updater.
    updater = await policyUpdaterFor(spec, options.modelDir, logger, execution);
    const trainer = runTrainer({ transport, runId: spec.run_id, updater, pollMs: 50, runWaitMs: 10_000, logger, metrics, retention: { keepLast: options.keepWeights, checkpointEvery: 0 }, onBatch: (b) => batches.push(b), onCommitted: recorder.onCommitted });
    // Surface a trainer failure at once instead of waiting on a coordinator that can no longer finish.
    const trainerFailed = trainer.then(
      () => new Promise<never>(() => undefined),
      (error: unknown) => Promise.reject(error),
    );
    if (progress !== 'off') {
      progressTimer = setInterval(() => {
        void activeTransport.counters(spec.run_id).then((c) => {
          grpoProgress.draw(renderProgress(spec, c, batches, grpoProgress.elapsedS, io.stderr.columns || 100), c.consumedEpisodes + c.failedGroups * spec.group_size, spec.episodes);
        });
      }, progress === 'bar' ? 200 : 1000);
    }
    const summary = await Promise.race([
      runCoordinator({ transport, spec, questions, pollMs: 50, logger, metrics, ...(io.signal ? { signal: io.signal } : {}) }),
      trainerFailed,
    ]);
    await trainer;
    if (progressTimer) {
      clearInterval(progressTimer);
      progressTimer = undefined;
      grpoProgress.finish(renderProgress(spec, await transport.counters(spec.run_id), batches, summary.elapsed_s, io.stderr.columns || 100));
    }
    await worker?.close();
    recorder.finish();
    if (heldOut) evals.push(await heldOut.run('after', summary.policy_version, recorder.lastWeights));
    const report = writeRunReport(runDir);
    const evalJson = Object.fromEntries(evals.map((x) => [x.name, { version: x.version, episodes: x.episodes_count, success_rate: x.success_rate, mean_reward: x.mean_reward, pass_at_k: passAtKOf(x) }]));
    const paired = pairedJson(evals);
    if (options.json) io.stdout.write(`${JSON.stringify({ ...summary, run_dir: runDir, report, adapters: recorder.savedAdapterVersions, evals: evalJson, ...(paired === undefined ? {} : { paired }) })}\n`);
    else io.stdout.write(`${formatSummary(summary, batches)}${formatRunDir(runDir, report, recorder.savedAdapterVersions, evals)}`);
    return runHealth(io, recorder.nonFiniteVersions, evals);
  } catch (error) {
    return reportCommandError(io, 'train', error);
  } finally {
    if (progressTimer) clearInterval(progressTimer);
    await worker?.close();
    await updater?.close();
    await heldOut?.close();
    await server?.close();
    await transport?.close();
    await runtimes?.close();
  }
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

interface HeldOutOptions {
  runDir: string;
  episodes: number | 'all';
  split: 'train' | 'dev';
  seed: number;
  /** Plays of every question, each with its own seed. */
  seeds: number;
  /** 0: greedy. */
  temperature: number;
  concurrency: number;
}

/**
 * The run's held-out evaluation: the same questions and seeds before training and after it, with
 * the run's policy (greedy for a model) in its own resources, so it never competes with the worker's
 * episodes; the final weights are applied for the 'after' one.
 */
class HeldOutEvaluation {
  readonly #spec: RolloutRunSpec;
  readonly #runtime: SqlEnvRuntime;
  readonly #resolveRun: ResolveRun;
  readonly #options: HeldOutOptions;
  readonly #progress: { stream: NodeJS.WritableStream; mode: ProgressMode };
  #resources: ReturnType<ResolveRun> | undefined;

  constructor(spec: RolloutRunSpec, runtime: SqlEnvRuntime, resolveRun: ResolveRun, options: HeldOutOptions, progress: { stream: NodeJS.WritableStream; mode: ProgressMode }) {
    this.#spec = spec;
    this.#runtime = runtime;
    this.#resolveRun = resolveRun;
    this.#options = options;
    this.#progress = progress;
    const ids = runtime.dataset.questionsOf(options.split).map((q) => q.question_id);
    if (ids.length === 0) throw new AppError(ErrorCode.VALIDATION, `--eval-split ${options.split}: dataset ${spec.dataset} has no questions in that split`);
  }

  async run(name: string, version: number, weights: Buffer | null): Promise<SavedEval> {
    const evalSpec = this.#spec.model === undefined ? this.#spec : { ...this.#spec, model: { ...this.#spec.model, sampling: { ...this.#spec.model.sampling, temperature: this.#options.temperature } } };
    this.#resources ??= this.#resolveRun(evalSpec);
    const resources = await this.#resources;
    if (version > 0) await resources.applyWeights?.(weights, version);
    const drawn = drawQuestionIds(this.#runtime.dataset.questionsOf(this.#options.split).map((q) => q.question_id), this.#options.episodes, this.#options.seed);
    // Every question once per seed; episode i resets (and samples) with seed + i, the same before and after.
    const ids = Array.from({ length: this.#options.seeds }, () => drawn).flat();
    const progress = new PhaseProgress(`Evaluation ${name} (v${version}, ${this.#options.split})`, this.#progress.stream, this.#progress.mode);
    const { saved } = await evaluateIntoRunDir({
      runDir: this.#options.runDir,
      name,
      version,
      policy: resources.policy,
      createEnvironment: () => this.#runtime.createEnvironment(),
      questionIds: ids,
      seed: this.#options.seed,
      concurrency: this.#options.concurrency,
      dataset: this.#spec.dataset,
      split: this.#options.split,
      onProgress: (done, total) => progress.update(done, total),
    });
    progress.finish();
    return saved;
  }

  async close(): Promise<void> {
    const resources = await this.#resources;
    await resources?.release?.();
  }
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

function runHealth(io: RolloutCommandIo, nonFiniteVersions: readonly number[], evals: readonly SavedEval[]): number {
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
