/**
 * Docker / direct entrypoint: `node --import tsx apps/env-server/src/main.ts`.
 * Configuration comes from environment variables only (PORT, HOST,
 * SQLENV_DATASET, SQLENV_API_KEY, SQLENV_MAX_SESSIONS, SQLENV_IDLE_TIMEOUT_S,
 * SQLENV_CACHE_DIR, SQLENV_WEB, LOG_LEVEL); see apps/env-server/README.md.
 */
import { createRootLogger, toAppError } from '@sqlenv/shared';
import { parseServeConfig, serveUntilSignal } from './serve-command.ts';

async function main(): Promise<void> {
  const config = parseServeConfig([], process.env);
  if (config === 'help') return;
  const logger = createRootLogger('env-server', { level: config.logLevel });
  try {
    await serveUntilSignal(config, logger);
  } catch (error) {
    logger.fatal({ err: toAppError(error) }, 'env server failed');
    logger.flush();
    process.exitCode = 1;
    return;
  }
  logger.flush();
  // Everything is closed; exit explicitly so a stray timer in a dependency cannot keep the container up.
  setImmediate(() => process.exit(0));
}

void main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(2);
});
