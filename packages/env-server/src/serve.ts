import type { AddressInfo } from 'node:net';
import { AppError, ErrorCode, formatZodIssues, type Logger } from '@sqlenv/shared';
import { createSqlEnvRuntime } from '@sqlenv/sql-env';
import { ServeConfigSchema, ServeEnvSchema, type ServeConfig } from './config.ts';
import { createEnvServer, type EnvServer } from './env-server.ts';


/**
 * The serve config: schema defaults, then environment variables (ServeEnvSchema), then `overrides`
 * (the command line's flags: they win). Throws AppError VALIDATION naming the bad value.
 */
export function resolveServeConfig(overrides: Partial<Record<keyof ServeConfig, unknown>>, env: Record<string, string | undefined>): ServeConfig {
  const fromEnv = ServeEnvSchema.safeParse(env);
  if (!fromEnv.success) throw new AppError(ErrorCode.VALIDATION, `invalid environment: ${formatZodIssues(fromEnv.error)}`);
  const given = Object.fromEntries(Object.entries(overrides).filter(([, v]) => v !== undefined));
  const parsed = ServeConfigSchema.safeParse({ ...fromEnv.data, ...given });
  if (!parsed.success) throw new AppError(ErrorCode.VALIDATION, `invalid serve options: ${formatZodIssues(parsed.error)}`);
  return parsed.data;
}

export interface RunningServer {
  server: EnvServer;
  address: AddressInfo;
}

/** Load the dataset, start the executor pool and the server; the server owns (and closes) the runtime. */
export async function startServer(config: ServeConfig, logger: Logger): Promise<RunningServer> {
  const { port, host, dataset, cacheDir, skipMissingDbs, mode, executorPoolSize, executorInProcessMaxMs, logLevel: _logLevel, ...limits } = config;
  const executor = {
    ...(executorPoolSize === undefined ? {} : { poolSize: executorPoolSize }),
    ...(executorInProcessMaxMs === undefined ? {} : { inProcessMaxMs: executorInProcessMaxMs }),
  };
  const runtime = await createSqlEnvRuntime({ dataset, ...(cacheDir === undefined ? {} : { cacheDir }), executor, env: { rewardMode: mode }, datasetLoad: { skipMissingDbs }, logger });
  logger.info({ dataset: runtime.dataset.name, databases: runtime.dataset.databases.size, questions: runtime.dataset.questions.length, skippedDatabases: runtime.dataset.skippedDatabases.map((s) => s.db_id) }, 'dataset loaded');
  const server = createEnvServer({ runtime, ownsRuntime: true, logger, ...limits });
  try {
    const address = await server.listen(port, host);
    return { server, address };
  } catch (error) {
    await server.close();
    throw error;
  }
}

/**
 * Run the server until SIGTERM or SIGINT, then shut down gracefully (sessions
 * get SESSION_ERROR "Server shutting down" and close code 1001). Resolves
 * once everything is closed.
 */
export async function serveUntilSignal(config: ServeConfig, logger: Logger): Promise<void> {
  const { server, address } = await startServer(config, logger);
  logger.info({ url: `http://${address.address}:${address.port}`, web: config.web ? '/web' : null, docs: '/docs' }, 'serving');
  await new Promise<void>((resolve) => {
    const onSignal = (signal: NodeJS.Signals): void => {
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
      logger.info({ signal }, 'signal received');
      server.close().then(resolve, (error: unknown) => {
        logger.error({ err: error }, 'shutdown failed');
        resolve();
      });
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
}
