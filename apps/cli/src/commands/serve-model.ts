import { once } from 'node:events';
import { z } from 'zod';
import type { LoraConfigInput } from '@sqlenv/model';
import { createRootLogger } from '@sqlenv/shared';
import { ExecutionFlags, executionFlagOptions, startExecution } from '../execution-flags.ts';
import { intFlag, parseFlags, positiveIntFlag, printUsage, wantsHelp } from '../flags.ts';
import { reportCommandError, type CommandIo } from '../io.ts';
import { serveModelUsage } from './usage.ts';

const serveModelFlagSpecs = {
  model: {},
  adapter: {},
  port: {},
  host: {},
  'api-key': { env: 'SQLENV_INFERENCE_API_KEY' },
  'served-model-name': {},
  'max-loras': {},
  'lora-rank': {},
  'lora-alpha': {},
  'lora-targets': {},
  'max-batch-size': {},
  'max-pending-requests': {},
  'max-model-len': {},
  'top-k': {},
  replicas: {},
  'log-level': { env: 'LOG_LEVEL' },
  ...executionFlagOptions,
};

const ServeModelFlags = ExecutionFlags.extend({
  model: z.string().min(1),
  adapter: z.string().min(1).optional(),
  port: z.coerce.number().int().min(0).max(65_535).optional(),
  host: z.string().min(1).optional(),
  'api-key': z.string().min(1).optional(),
  'served-model-name': z.string().min(1).optional(),
  'max-loras': intFlag.optional(),
  'lora-rank': positiveIntFlag.optional(),
  'lora-alpha': z.coerce.number().positive().optional(),
  'lora-targets': z.string().min(1).optional(),
  'max-batch-size': positiveIntFlag.default(32),
  'max-pending-requests': positiveIntFlag.optional(),
  'max-model-len': positiveIntFlag.optional(),
  'top-k': intFlag.optional(),
  replicas: positiveIntFlag.optional(),
  'log-level': z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal']).default('info'),
});
type ServeModelFlags = z.infer<typeof ServeModelFlags>;

/**
 * `sqlenv serve-model --model DIR [...]`: the inference engine behind vLLM's OpenAI-compatible
 * completions contract (docs/remote-inference.md) until SIGINT/SIGTERM, then stop accepting, finish
 * the requests in flight and close the engine. Exit 0 after a clean shutdown, 2 on bad options.
 */
export async function serveModelCommand(argv: readonly string[], io: CommandIo): Promise<number> {
  if (wantsHelp(argv)) return printUsage(io, serveModelUsage);
  try {
    return await serveModel(argv, io);
  } catch (error) {
    return reportCommandError(io, 'serve-model', error);
  }
}

async function serveModel(argv: readonly string[], io: CommandIo): Promise<number> {
  const env = io.env ?? {};
  const { flags } = parseFlags(argv, serveModelFlagSpecs, ServeModelFlags, { env });
  const logger = createRootLogger('model-server', { level: flags['log-level'] });
  const execution = await startExecution(flags, env, logger, true);
  const model = await import('@sqlenv/model');
  const { ModelServer } = await import('@sqlenv/model-server');
  const config = model.readModelConfig(flags.model);
  const plan = model.replicaPlan({
    provider: execution.provider,
    threads: execution.intraOpThreads,
    maxBatchSize: flags['max-batch-size'],
    weightBytes: 4 * model.countParameters(config),
    replicas: flags.replicas,
  });
  const server = await ModelServer.start(
    {
      modelDir: flags.model,
      ...optional({ adapterDir: flags.adapter, port: flags.port, host: flags.host, apiKey: flags['api-key'], servedModelName: flags['served-model-name'] }),
      ...optional({ maxLoras: flags['max-loras'], maxPendingRequests: flags['max-pending-requests'], maxModelLen: flags['max-model-len'], topK: flags['top-k'] }),
      ...loraOption(flags),
      engine: { maxBatchSize: flags['max-batch-size'], ...execution, ...plan },
    },
    logger,
  );
  const signal = io.signal;
  if (signal !== undefined && !signal.aborted) await once(signal, 'abort');
  await server.close();
  logger.flush();
  return 0;
}

/** The LoRA shape flags, when any is given (the rest from loraConfigSchema's defaults). */
function loraOption(flags: ServeModelFlags): { lora?: LoraConfigInput } {
  // Target names are checked by ModelServer.start (loraConfigSchema), which names a wrong one.
  const targets = flags['lora-targets']?.split(',').map((t) => t.trim()).filter((t) => t !== '') as LoraConfigInput['targets'];
  const lora = optional({ rank: flags['lora-rank'], alpha: flags['lora-alpha'], targets });
  return Object.keys(lora).length === 0 ? {} : { lora };
}

/** The entries whose value is defined (exactOptionalPropertyTypes forbids passing `undefined`). */
function optional<T extends Record<string, unknown>>(values: T): { [K in keyof T]?: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(values).filter(([, v]) => v !== undefined)) as { [K in keyof T]?: Exclude<T[K], undefined> };
}
