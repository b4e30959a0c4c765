import { hostname } from 'node:os';
import { z } from 'zod';
import { RunIdSchema } from '@sqlenv/protocol';
import { createRootLogger } from '@sqlenv/shared';
import { BullmqTransport, RolloutMetrics, RolloutWorker, RuntimeCache, Wakeup, createRunResolver, runtimeOptionsFrom } from '@sqlenv/rollout';
import { printUsage, parseFlags, wantsHelp, type FlagSpec } from '../flags.ts';
import { reportCommandError, type CommandIo } from '../io.ts';
import { checkExecutionProvider, ExecutionOptionsSchema, executionOptionSpecs, modelExecutionOf } from './execution-options.ts';
import { runtimeOptionSpecs, RuntimeOptionsSchema, transportConfig, transportOptionSpecs, TransportOptionsSchema } from './transport-options.ts';
import { ModelDirOptionsSchema, modelDirOptionSpecs } from './model-options.ts';
import { startStatusEndpoint, type StatusEndpoint } from './status-endpoint.ts';
import { workerUsage } from './usage.ts';
import { AdapterShareOptionsSchema, adapterShareOptionSpecs, InferenceOptionsSchema, inferenceOptionSpecs, startRemoteInference } from './inference-options.ts';

export const workerOptionSpecs: Record<string, FlagSpec> = {
  run: { key: 'runId', env: 'RUN_ID' },
  concurrency: { key: 'concurrency', env: 'SQLENV_CONCURRENCY' },
  'env-url': { key: 'envUrl', env: 'SQLENV_ENV_URL' },
  'env-api-key': { key: 'envApiKey', env: 'SQLENV_ENV_API_KEY' },
  'worker-id': { key: 'workerId', env: 'SQLENV_WORKER_ID' },
  'discovery-ms': { key: 'discoveryMs', env: 'SQLENV_DISCOVERY_MS' },
};

const WorkerOptionsSchema = z
  .object({
    /** Serve only this run, and exit when it is done; without it, serve every run until SIGTERM. */
    runId: RunIdSchema.optional(),
    /** Episodes in flight per run in this process. */
    concurrency: z.coerce.number().int().positive().default(16),
    envUrl: z.string().optional(),
    envApiKey: z.string().optional(),
    workerId: z.string().min(1).default(`${hostname()}-${process.pid}`),
    /** How often to look for new runs, in milliseconds. */
    discoveryMs: z.coerce.number().int().positive().default(1_000),
  })
  .extend(TransportOptionsSchema.shape)
  .extend(RuntimeOptionsSchema.shape)
  .extend(ExecutionOptionsSchema.shape)
  .extend(ModelDirOptionsSchema.shape)
  .extend(InferenceOptionsSchema.shape)
  .extend(AdapterShareOptionsSchema.shape);

/**
 * `sqlenv worker`: play episode jobs until SIGTERM (or until `--run` is done).
 * On SIGTERM it stops taking jobs and finishes the ones in flight.
 */
export async function workerCommand(argv: readonly string[], io: CommandIo): Promise<number> {
  if (wantsHelp(argv)) return printUsage(io, workerUsage);
  let transport: BullmqTransport | undefined;
  let endpoint: StatusEndpoint | undefined;
  let worker: RolloutWorker | undefined;
  let runtimes: RuntimeCache | undefined;
  try {
    const options = parseFlags(argv, { ...workerOptionSpecs, ...transportOptionSpecs, ...runtimeOptionSpecs, ...executionOptionSpecs, ...modelDirOptionSpecs, ...inferenceOptionSpecs, ...adapterShareOptionSpecs }, WorkerOptionsSchema, { env: io.env ?? {} }).flags;
    const logger = io.logger ?? createRootLogger('worker', { fd: 2, level: options.logLevel });
    const execution = modelExecutionOf(options);
    await checkExecutionProvider(execution, io.env ?? {}, logger);
    // A worker sampling remotely plays training runs: their versions come through the share.
    const remote = await startRemoteInference(options, { training: true, logger });
    transport = new BullmqTransport(transportConfig(options), { logger });
    runtimes = new RuntimeCache(runtimeOptionsFrom(options, logger));
    const metrics = new RolloutMetrics({ processMetrics: true });
    const activeWorker = new RolloutWorker({
      transport,
      resolveRun: createRunResolver(runtimes, {
        ...(options.envUrl === undefined ? {} : { envUrl: options.envUrl }),
        ...(options.envApiKey === undefined ? {} : { envApiKey: options.envApiKey }),
        ...(options.modelDir === undefined ? {} : { modelDir: options.modelDir }),
        maxBatchSize: options.concurrency,
        execution,
        ...(remote === undefined ? {} : { remote }),
        logger,
      }),
      concurrency: options.concurrency,
      ...(options.runId === undefined ? {} : { runId: options.runId }),
      workerId: options.workerId,
      discoveryMs: options.discoveryMs,
      logger,
      metrics,
    });
    worker = activeWorker;
    endpoint = await startStatusEndpoint(transport, options, metrics, () => ({ app: 'worker', worker_id: options.workerId, runs: activeWorker.runs, episodes_played: activeWorker.episodesPlayed, concurrency: options.concurrency }), logger);
    await worker.start();
    logger.info({ workerId: options.workerId, concurrency: options.concurrency, runId: options.runId ?? null }, 'worker started');
    const wakeup = new Wakeup();
    io.signal?.addEventListener('abort', () => wakeup.wake(), { once: true });
    while (!io.signal?.aborted) {
      if (options.runId !== undefined && (await transport.getRun(options.runId)) && (await transport.counters(options.runId)).done) break;
      await wakeup.wait(options.discoveryMs);
    }
    logger.info({ episodesPlayed: worker.episodesPlayed }, 'worker stopping: finishing episodes in flight');
    await worker.close();
    return 0;
  } catch (error) {
    return reportCommandError(io, 'worker', error);
  } finally {
    await worker?.close();
    await endpoint?.close();
    await transport?.close();
    await runtimes?.close();
  }
}
