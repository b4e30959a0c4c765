import { randomBytes } from 'node:crypto';
import type { z } from 'zod';
import { createRootLogger } from '@sqlenv/shared';
import { BullmqTransport, RolloutMetrics, RuntimeCache, runCoordinator, scheduledQuestions } from '@sqlenv/rollout';
import { printUsage, parseFlags, wantsHelp } from '../flags.ts';
import { reportCommandError, type CommandIo } from '../io.ts';
import { runtimeOptionSpecs, RuntimeOptionsSchema, transportConfig, transportOptionSpecs, TransportOptionsSchema } from './transport-options.ts';
import { runSpecFrom, SpecOptionsSchema, specOptionSpecs } from './spec-options.ts';
import { ModelDirOptionsSchema, modelDirOptionSpecs, ModelSpecOptionsSchema, modelSpecOptionSpecs, runModelSpec } from './model-options.ts';
import { coordinatorUsage } from './usage.ts';
import { startStatusEndpoint, type StatusEndpoint } from './status-endpoint.ts';

const CoordinatorOptionsSchema = SpecOptionsSchema.extend(TransportOptionsSchema.shape).extend(RuntimeOptionsSchema.shape).extend(ModelDirOptionsSchema.shape).extend(ModelSpecOptionsSchema.shape);

/**
 * `sqlenv coordinator`: register the run, admit its groups under the staleness
 * bound, wait for the trainer to finish it, print ONE JSON line (RunSummary).
 */
export async function coordinatorCommand(argv: readonly string[], io: CommandIo): Promise<number> {
  if (wantsHelp(argv)) return printUsage(io, coordinatorUsage);
  let transport: BullmqTransport | undefined;
  let endpoint: StatusEndpoint | undefined;
  try {
    const options = parseFlags(argv, { ...specOptionSpecs, ...transportOptionSpecs, ...runtimeOptionSpecs, ...modelDirOptionSpecs, ...modelSpecOptionSpecs }, CoordinatorOptionsSchema, { env: io.env ?? {} }).flags;
    const spec = runSpecFrom(options, () => `run-${randomBytes(4).toString('hex')}`, await runModelSpec(options.policy, options));
    const logger = io.logger ?? createRootLogger('coordinator', { fd: 2, level: options.logLevel });
    const runtimes = new RuntimeCache({ ...(options.cacheDir === undefined ? {} : { cacheDir: options.cacheDir }), ...(options.skipMissingDbs === undefined ? {} : { skipMissingDbs: options.skipMissingDbs }), executorPoolSize: 1, logger });
    let questions;
    try {
      questions = scheduledQuestions((await runtimes.get(spec.dataset)).dataset, spec.split);
    } finally {
      await runtimes.close();
    }
    transport = new BullmqTransport(transportConfig(options), { logger });
    const metrics = new RolloutMetrics({ processMetrics: true });
    const activeTransport = transport;
    endpoint = await startStatusEndpoint(transport, options, metrics, async () => ({ app: 'coordinator', run_id: spec.run_id, spec, counters: await activeTransport.counters(spec.run_id) }), logger);
    const summary = await runCoordinator({ transport, spec, questions, pollMs: options.pollMs, logger, metrics, ...(io.signal ? { signal: io.signal } : {}) });
    io.stdout.write(`${JSON.stringify(summary)}\n`);
    return 0;
  } catch (error) {
    return reportCommandError(io, 'coordinator', error);
  } finally {
    await endpoint?.close();
    await transport?.close();
  }
}

export type CoordinatorCommandOptions = z.infer<typeof CoordinatorOptionsSchema>;
