import { z } from 'zod';
import { createRootLogger } from '@sqlenv/shared';
import { RolloutMetrics } from '../metrics.ts';
import { transportHealthCheck, type HealthCheck } from '../health.ts';
import { startStatusServer, type StatusServer } from '../status-server.ts';
import { runTrainer, StatsPolicyUpdater } from '../trainer.ts';
import { BullmqTransport } from '../transport/bullmq-transport.ts';
import { readOptions, reportCommandError, type OptionSpec, type RolloutCommandIo } from './command-io.ts';
import { checkExecutionProvider, ExecutionOptionsSchema, executionOptionSpecs } from './execution-provider.ts';
import { transportConfig, transportOptionSpecs, TransportOptionsSchema } from './shared-options.ts';

export const trainerUsage = 'sqlenv trainer --redis URL --run ID [--metrics-port P]';

export const trainerOptionSpecs: Record<string, OptionSpec> = {
  run: { key: 'runId', env: 'RUN_ID' },
  'run-wait-ms': { key: 'runWaitMs', env: 'SQLENV_RUN_WAIT_MS' },
};

const TrainerOptionsSchema = z
  .object({
    runId: z.string().min(1),
    /** How long to wait for the coordinator to register the run, in milliseconds. */
    runWaitMs: z.coerce.number().int().positive().default(600_000),
  })
  .extend(TransportOptionsSchema.shape)
  .extend(ExecutionOptionsSchema.shape);

/**
 * `sqlenv trainer`: consume the run's scored groups until the run is done (or
 * SIGTERM), then print one JSON line. Restartable at any point: it resumes
 * from the committed version and weights.
 */
export async function trainerCommand(argv: readonly string[], io: RolloutCommandIo): Promise<number> {
  let transport: BullmqTransport | undefined;
  let server: StatusServer | undefined;
  let health: HealthCheck | undefined;
  try {
    const options = readOptions(argv, io.env ?? {}, { ...trainerOptionSpecs, ...transportOptionSpecs, ...executionOptionSpecs }, TrainerOptionsSchema);
    const logger = io.logger ?? createRootLogger('trainer', { fd: 2, level: options.logLevel });
    await checkExecutionProvider(options.executionProvider, io.env ?? {}, logger);
    const activeTransport = new BullmqTransport(transportConfig(options), { logger });
    transport = activeTransport;
    const metrics = new RolloutMetrics({ processMetrics: true });
    if (options.metricsPort !== undefined) {
      const check = transportHealthCheck(transport, options);
      health = check;
      server = await startStatusServer({
        health: () => check.check(),
        port: options.metricsPort,
        host: options.metricsHost,
        registry: metrics.registry,
        status: async () => ({ app: 'trainer', run_id: options.runId, counters: (await activeTransport.getRun(options.runId)) ? await activeTransport.counters(options.runId) : null }),
        logger,
      });
    }
    const result = await runTrainer({
      transport,
      runId: options.runId,
      updater: new StatsPolicyUpdater(),
      pollMs: options.pollMs,
      runWaitMs: options.runWaitMs,
      logger,
      metrics,
      ...(io.signal ? { signal: io.signal } : {}),
    });
    io.stdout.write(`${JSON.stringify({ run_id: options.runId, finished: result.finished, policy_version: result.version, batches_this_process: result.batchesThisProcess })}\n`);
    return 0;
  } catch (error) {
    return reportCommandError(io, 'trainer', error);
  } finally {
    health?.close();
    await server?.close();
    await transport?.close();
  }
}
