import { hostname } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { RunIdSchema } from '@sqlenv/protocol';
import { createRootLogger, type Logger } from '@sqlenv/shared';
import { RunRecorder, writeRunReport, writeRunSpec } from '@sqlenv/runs';
import { BullmqTransport, BullmqTransportConfigSchema, RolloutMetrics, RunAdmin, policyUpdaterFor, runTrainer, serveRuns, waitForRun, type ModelExecution, type PolicyUpdater } from '@sqlenv/rollout';
import { printUsage, parseFlags, wantsHelp, type FlagSpec } from '../flags.ts';
import { reportCommandError, type CommandIo } from '../io.ts';
import { checkExecutionProvider, ExecutionOptionsSchema, executionOptionSpecs, modelExecutionOf } from './execution-options.ts';
import { transportConfig, transportOptionSpecs, TransportOptionsSchema } from './transport-options.ts';
import { ModelDirOptionsSchema, modelDirOptionSpecs } from './model-options.ts';
import { trainerUsage } from './usage.ts';
import { AdapterShareOptionsSchema, adapterShareOptionSpecs, checkAdapterShare } from './inference-options.ts';
import { startStatusEndpoint, type StatusEndpoint } from './status-endpoint.ts';

export const trainerOptionSpecs: Record<string, FlagSpec> = {
  run: { key: 'runId', env: 'RUN_ID' },
  'run-wait-ms': { key: 'runWaitMs', env: 'SQLENV_RUN_WAIT_MS' },
  'trainer-lease-ms': { key: 'trainerLeaseMs', env: 'SQLENV_TRAINER_LEASE_MS' },
  'trainer-id': { key: 'trainerId', env: 'SQLENV_TRAINER_ID' },
  'keep-weights': { key: 'keepWeights', env: 'SQLENV_KEEP_WEIGHTS' },
  'checkpoint-every': { key: 'checkpointEvery', env: 'SQLENV_CHECKPOINT_EVERY' },
  'run-retention-s': { key: 'runRetentionS', env: 'SQLENV_RUN_RETENTION_S' },
  'run-dir': { key: 'runDir', env: 'SQLENV_RUN_DIR' },
  'save-every': { key: 'saveEvery', env: 'SQLENV_SAVE_EVERY' },
  'tis-cap': { key: 'tisCap', env: 'SQLENV_TIS_CAP' },
};

const TrainerOptionsSchema = z
  .object({
    /** Train this run and exit when it is done; without it, serve every active run that has no trainer. */
    runId: RunIdSchema.optional(),
    /** How long to wait for the coordinator to register the run, in milliseconds. */
    runWaitMs: z.coerce.number().int().positive().default(600_000),
    /** Time to live of the trainer lease (renewed every third of it), in milliseconds; a dead trainer's run is free after this. */
    trainerLeaseMs: z.coerce.number().int().positive().default(15_000),
    trainerId: z.string().min(1).default(`${hostname()}-${process.pid}`),
    /** Committed weights kept: the newest K versions (older ones are deleted after each commit). */
    keepWeights: z.coerce.number().int().positive().default(3),
    /** Also keep every N-th version as a checkpoint (0 = none). */
    checkpointEvery: z.coerce.number().int().nonnegative().default(0),
    /** A finished run's keys expire this long after it ends, in seconds (0 = kept until `sqlenv runs delete`). */
    runRetentionS: z.coerce.number().int().nonnegative().default(7 * 24 * 3600),
    /**
     * Write each trained run's run directory (metrics.jsonl, adapters/, report.html) here: the
     * directory itself with --run, else DIR/<run id> (a trainer serving runs trains many).
     */
    runDir: z.string().min(1).optional(),
    /** Save the adapter of every N-th version too (0 = only the final one). */
    saveEvery: z.coerce.number().int().nonnegative().default(0),
    /**
     * Cap C of the truncated importance weight min(π_learner/π_sampler, C), over the run spec's
     * loss.importanceCap (0 = no weight); unset: the spec's.
     */
    tisCap: z.coerce.number().nonnegative().optional(),
  })
  .extend(TransportOptionsSchema.shape)
  .extend(ExecutionOptionsSchema.shape)
  .extend(ModelDirOptionsSchema.shape)
  .extend(AdapterShareOptionsSchema.pick({ adapterShare: true }).shape);

/** Train a run with its updater (`policyUpdaterFor`), released when the run is done. */
async function withUpdater<T>(
  transport: BullmqTransport,
  runId: string,
  options: { runWaitMs: number; pollMs: number; modelDir?: string | undefined; execution: ModelExecution; tisCap?: number | undefined },
  logger: Logger,
  signal: AbortSignal | undefined,
  use: (updater: PolicyUpdater) => Promise<T>,
): Promise<T> {
  const spec = await waitForRun(transport, runId, options.runWaitMs, options.pollMs, signal);
  if (options.tisCap !== undefined) logger.info({ runId, tisCap: options.tisCap }, 'truncated-IS cap of this trainer, over the run spec\'s');
  const updater = await policyUpdaterFor(spec, options.modelDir, logger, options.execution, { tisCap: options.tisCap });
  try {
    return await use(updater);
  } finally {
    await updater.close();
  }
}

/**
 * `sqlenv trainer`: with `--run`, consume that run's scored groups until it is done (or SIGTERM);
 * without, serve runs one after another: take an active run no other trainer holds (a lease in
 * Redis), train it to the end, take the next (docker-compose runs it this way). One JSON line per
 * run trained. Restartable at any point: it resumes from the committed version and weights.
 */
export async function trainerCommand(argv: readonly string[], io: CommandIo): Promise<number> {
  if (wantsHelp(argv)) return printUsage(io, trainerUsage);
  let transport: BullmqTransport | undefined;
  let endpoint: StatusEndpoint | undefined;
  try {
    const options = parseFlags(argv, { ...trainerOptionSpecs, ...transportOptionSpecs, ...executionOptionSpecs, ...modelDirOptionSpecs, 'adapter-share': adapterShareOptionSpecs['adapter-share'] }, TrainerOptionsSchema, { env: io.env ?? {} }).flags;
    const logger = io.logger ?? createRootLogger('trainer', { fd: 2, level: options.logLevel });
    const execution = modelExecutionOf(options);
    await checkExecutionProvider(execution, io.env ?? {}, logger);
    await checkAdapterShare(options);
    const activeTransport = new BullmqTransport(transportConfig(options), { logger });
    transport = activeTransport;
    const metrics = new RolloutMetrics({ processMetrics: true });
    endpoint = await startStatusEndpoint(transport, options, metrics, async () => ({ app: 'trainer', trainer_id: options.trainerId, run_id: options.runId ?? null, active_runs: await activeTransport.activeRuns() }), logger);
    const retention = { keepLast: options.keepWeights, checkpointEvery: options.checkpointEvery };
    await serveRuns({
      leases: activeTransport,
      owner: options.trainerId,
      leaseMs: options.trainerLeaseMs,
      pollMs: options.pollMs,
      ...(options.runId === undefined ? {} : { runId: options.runId }),
      logger,
      ...(io.signal ? { signal: io.signal } : {}),
      train: async (runId, signal) => {
        const runDir = options.runDir === undefined ? undefined : options.runId === undefined ? join(options.runDir, runId) : options.runDir;
        const recorder = runDir === undefined ? undefined : new RunRecorder({ dir: runDir, runId, saveEvery: options.saveEvery, logger });
        const result = await withUpdater(activeTransport, runId, { ...options, execution }, logger, signal, (updater) =>
          runTrainer({
            transport: activeTransport,
            runId,
            updater,
            pollMs: options.pollMs,
            runWaitMs: options.runWaitMs,
            logger,
            metrics,
            retention,
            signal,
            ...(recorder === undefined ? {} : { onCommitted: recorder.onCommitted }),
            ...(options.adapterShare === undefined ? {} : { adapterShare: options.adapterShare }),
          }),
        );
        let report: string | undefined;
        if (recorder !== undefined && runDir !== undefined) {
          recorder.finish();
          const spec = await activeTransport.getRun(runId);
          if (spec) writeRunSpec(runDir, spec);
          report = writeRunReport(runDir);
        }
        if (result.finished && options.runRetentionS > 0) {
          const { redisUrl, keyBase } = BullmqTransportConfigSchema.parse(transportConfig(options));
          const admin = new RunAdmin({ redisUrl, keyBase });
          try {
            const keys = await admin.expire(runId, options.runRetentionS);
            logger.info({ runId, keys, retentionS: options.runRetentionS }, 'finished run will expire');
          } finally {
            await admin.close();
          }
        }
        io.stdout.write(`${JSON.stringify({ run_id: runId, finished: result.finished, policy_version: result.version, batches_this_process: result.batchesThisProcess, ...(report === undefined ? {} : { run_dir: runDir, report }) })}\n`);
      },
    });
    return 0;
  } catch (error) {
    return reportCommandError(io, 'trainer', error);
  } finally {
    await endpoint?.close();
    await transport?.close();
  }
}
