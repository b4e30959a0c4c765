/**
 * Docker / direct entrypoint: `node --import tsx apps/env-server/src/main.ts`.
 * Configuration comes from environment variables only (PORT, HOST,
 * SQLENV_DATASET, SQLENV_API_KEY, SQLENV_MODE, SQLENV_ALLOWED_HOSTS,
 * SQLENV_MAX_SESSIONS, SQLENV_IDLE_TIMEOUT_S, SQLENV_CACHE_DIR, SQLENV_WEB,
 * LOG_LEVEL); see packages/env-server/README.md.
 */
import { createRootLogger, toAppError, type Logger } from '@sqlenv/shared';
import { resolveServeConfig, serveUntilSignal } from '@sqlenv/env-server';

function flushed(logger: Logger): Promise<void> {
  return new Promise((resolve) => logger.flush(() => resolve()));
}

async function main(): Promise<number> {
  const config = resolveServeConfig({}, process.env);
  const logger = createRootLogger('env-server', { level: config.logLevel });
  try {
    await serveUntilSignal(config, logger);
  } catch (error) {
    logger.fatal({ err: toAppError(error) }, 'env server failed');
    await flushed(logger);
    return 1;
  }
  await flushed(logger);
  return 0;
}

// Exit explicitly once everything is closed, so a stray timer in a dependency cannot keep the container up.
main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(2);
  },
);
