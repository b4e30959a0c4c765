import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { createRootLogger, silentLogger } from '@sqlenv/shared';
import type { BatchStats } from '../batch-stats.ts';
import { runCoordinator, type RunSummary } from '../coordinator.ts';
import { RolloutMetrics } from '../metrics.ts';
import { RolloutWorker } from '../rollout-worker.ts';
import { startStatusServer, type StatusServer } from '../status-server.ts';
import { GrpoPolicyUpdater } from '../grpo-updater.ts';
import { runTrainer, StatsPolicyUpdater, type PolicyUpdater } from '../trainer.ts';
import { InProcessTransport } from '../transport/in-process-transport.ts';
import { booleanText, runtimeOptionSpecs, RuntimeOptionsSchema, TransportOptionsSchema } from './shared-options.ts';
import { readOptions, reportCommandError, type OptionSpec, type RolloutCommandIo } from './command-io.ts';
import { createRunResolver, RuntimeCache, runtimeOptionsFrom, scheduledQuestions } from './run-resources.ts';
import { renderProgress, sparkline } from './progress.ts';
import { runSpecFrom, SpecOptionsSchema, specOptionSpecs } from './spec-options.ts';
import { ModelDirOptionsSchema, modelDirOptionSpecs, ModelSpecOptionsSchema, modelSpecOptionSpecs, runModelSpec } from './model-options.ts';

export const trainUsage =
  'sqlenv train [--dataset builtin|DIR] [--policy random|oracle|model] [--model DIR] [--adapter DIR] [--prompt FILE] [--temperature T] [--max-new-tokens N] [--context-tokens N] [--episodes N] [--group-size G] [--groups-per-batch B] [--max-staleness S] [--concurrency C] [--json]';

const trainOptionSpecs: Record<string, OptionSpec> = {
  concurrency: { key: 'concurrency', env: 'SQLENV_CONCURRENCY' },
  json: { key: 'json', flag: true },
  'metrics-port': { key: 'metricsPort', env: 'METRICS_PORT' },
  'log-level': { key: 'logLevel', env: 'LOG_LEVEL' },
  'keep-weights': { key: 'keepWeights', env: 'SQLENV_KEEP_WEIGHTS' },
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
})
  .extend(RuntimeOptionsSchema.shape)
  .extend(ModelDirOptionsSchema.shape)
  .extend(ModelSpecOptionsSchema.shape);

/**
 * `sqlenv train`: coordinator, worker and trainer in one process on the
 * in-process transport (no Redis). A progress bar on a TTY stderr, a readable
 * summary at the end (`--json`: the RunSummary as one JSON line).
 */
export async function trainCommand(argv: readonly string[], io: RolloutCommandIo): Promise<number> {
  const transport = new InProcessTransport();
  let runtimes: RuntimeCache | undefined;
  let worker: RolloutWorker | undefined;
  let server: StatusServer | undefined;
  let progressTimer: NodeJS.Timeout | undefined;
  let grpo: GrpoPolicyUpdater | undefined;
  try {
    const options = readOptions(argv, io.env ?? {}, { ...specOptionSpecs, ...trainOptionSpecs, ...runtimeOptionSpecs, ...modelDirOptionSpecs, ...modelSpecOptionSpecs }, TrainOptionsSchema);
    const spec = runSpecFrom(options, () => `train-${randomBytes(3).toString('hex')}`, await runModelSpec(options.policy, options));
    const logger = io.logger ?? (options.logLevel === 'silent' ? silentLogger : createRootLogger('train', { fd: 2, level: options.logLevel }));
    const tty = io.stderr.isTTY === true && !options.json;
    if (tty) io.stderr.write(`Loading dataset ${spec.dataset}…\n`);
    runtimes = new RuntimeCache(runtimeOptionsFrom(options, logger));
    const runtime = await runtimes.get(spec.dataset);
    const questions = scheduledQuestions(runtime.dataset, spec.split);
    await transport.registerRun(spec);
    const metrics = new RolloutMetrics();
    if (options.metricsPort !== undefined) {
      server = await startStatusServer({
        port: options.metricsPort,
        host: '127.0.0.1',
        registry: metrics.registry,
        status: async () => ({ app: 'train', run_id: spec.run_id, counters: await transport.counters(spec.run_id) }),
        logger,
      });
    }
    const resolveRun = createRunResolver(runtimes, { ...(options.modelDir === undefined ? {} : { modelDir: options.modelDir }), maxBatchSize: options.concurrency, logger });
    worker = new RolloutWorker({ transport, resolveRun, concurrency: options.concurrency, runId: spec.run_id, workerId: 'embedded', discoveryMs: 200, logger, metrics });
    await worker.start();
    const batches: BatchStats[] = [];
    const started = performance.now();
    // A model run learns (GRPO on the LoRA adapter); oracle and random runs exercise the loop with
    // the statistics-only updater.
    if (spec.model !== undefined && options.modelDir !== undefined) grpo = await GrpoPolicyUpdater.create(spec.model, options.modelDir, { logger });
    const updater: PolicyUpdater = grpo ?? new StatsPolicyUpdater();
    const trainer = runTrainer({ transport, runId: spec.run_id, updater, pollMs: 50, runWaitMs: 10_000, logger, metrics, retention: { keepLast: options.keepWeights, checkpointEvery: 0 }, onBatch: (b) => batches.push(b) });
    // Surface a trainer failure at once instead of waiting on a coordinator that can no longer finish.
    const trainerFailed = trainer.then(
      () => new Promise<never>(() => undefined),
      (error: unknown) => Promise.reject(error),
    );
    if (tty) {
      progressTimer = setInterval(() => {
        void transport.counters(spec.run_id).then((c) => io.stderr.write(`\r${renderProgress(spec, c, batches, (performance.now() - started) / 1000, io.stderr.columns ?? 100)}`));
      }, 200);
    }
    const summary = await Promise.race([
      runCoordinator({ transport, spec, questions, pollMs: 50, logger, metrics, ...(io.signal ? { signal: io.signal } : {}) }),
      trainerFailed,
    ]);
    await trainer;
    if (progressTimer) {
      clearInterval(progressTimer);
      progressTimer = undefined;
      io.stderr.write(`\r${renderProgress(spec, await transport.counters(spec.run_id), batches, summary.elapsed_s, io.stderr.columns ?? 100)}\n`);
    }
    io.stdout.write(options.json ? `${JSON.stringify(summary)}\n` : formatSummary(summary, batches));
    return 0;
  } catch (error) {
    return reportCommandError(io, 'train', error);
  } finally {
    if (progressTimer) clearInterval(progressTimer);
    await worker?.close();
    await grpo?.close();
    await server?.close();
    await transport.close();
    await runtimes?.close();
  }
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
    lines.push(`  reward    ${sparkline(batches.map((b) => b.reward_mean))}  (per batch, ${num(Math.min(...batches.map((b) => b.reward_mean)))} … ${num(Math.max(...batches.map((b) => b.reward_mean)))})`);
    lines.push(`  success   ${sparkline(batches.map((b) => b.success_rate), 0, 1)}  (per batch, 0 … 100 %)`);
  }
  for (const failed of summary.failed_groups.slice(0, 5)) lines.push(`  failed    ${failed.group_id}: ${failed.reason}`);
  return `${lines.join('\n')}\n`;
}
