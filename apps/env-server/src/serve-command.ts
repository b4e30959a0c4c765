import { parseArgs } from 'node:util';
import type { AddressInfo } from 'node:net';
import { AppError, ErrorCode, createRootLogger, formatZodIssues, type Logger } from '@sqlenv/shared';
import { createSqlEnvRuntime } from '@sqlenv/sql-env';
import { ServeConfigSchema, ServeEnvSchema, splitList, type ServeConfig } from './config.ts';
import { createEnvServer, type EnvServer } from './env-server.ts';

export const SERVE_USAGE = `Usage: sqlenv serve [options]

Serve the SQL environment over the OpenEnv protocol (HTTP + WebSocket /ws, /web, /docs).

Options:
  --port <n>             port to listen on (default 8000; env PORT)
  --host <addr>          address to bind (default 127.0.0.1; env HOST; 0.0.0.0 exposes it)
  --dataset <builtin|dir> builtin dataset or a Spider-layout directory (env SQLENV_DATASET)
  --cache-dir <dir>      where the builtin dataset is generated (env SQLENV_CACHE_DIR)
  --skip-missing-dbs     serve without databases whose file is missing or empty, listing them;
                         without it such a dataset is refused (env SQLENV_SKIP_MISSING_DBS=1)
  --api-key <key>        require "Authorization: Bearer <key>" (env SQLENV_API_KEY)
  --mode <eval|train>    eval (default): clients see only the terminal reward; train: the shaped
                         reward RL trainers need (env SQLENV_MODE)
  --allowed-hosts <list> host names served besides loopback names and IP literals, comma-separated;
                         .name adds subdomains, * allows any (env SQLENV_ALLOWED_HOSTS)
  --max-sessions <n>     concurrent sessions, WebSocket + HTTP (default 1024; env SQLENV_MAX_SESSIONS)
  --idle-timeout-s <s>   reap sessions idle this long, 0 = never (default 600; env SQLENV_IDLE_TIMEOUT_S)
  --no-web               do not serve the /web page (env SQLENV_WEB=0)
  --log-level <level>    pino level (default info; env LOG_LEVEL)
  -h, --help             show this help
`;

/**
 * Build the serve config: schema defaults, then environment variables, then
 * command-line flags (flags win). Throws AppError VALIDATION naming the bad value.
 */
export function parseServeConfig(argv: readonly string[], env: Record<string, string | undefined>): ServeConfig | 'help' {
  // Help before anything is parsed: `--help` next to a wrong option still prints the usage.
  const optionsEnd = argv.indexOf('--');
  if ((optionsEnd === -1 ? argv : argv.slice(0, optionsEnd)).some((arg) => arg === '--help' || arg === '-h')) return 'help';
  const { values } = parseArgs({
    args: [...argv],
    strict: true,
    allowPositionals: false,
    options: {
      port: { type: 'string' },
      host: { type: 'string' },
      dataset: { type: 'string' },
      'cache-dir': { type: 'string' },
      'skip-missing-dbs': { type: 'boolean' },
      'api-key': { type: 'string' },
      mode: { type: 'string' },
      'allowed-hosts': { type: 'string' },
      'max-sessions': { type: 'string' },
      'idle-timeout-s': { type: 'string' },
      'no-web': { type: 'boolean' },
      'log-level': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help === true) return 'help';
  const fromEnv = ServeEnvSchema.safeParse(env);
  if (!fromEnv.success) throw new AppError(ErrorCode.VALIDATION, `invalid environment: ${formatZodIssues(fromEnv.error)}`);
  const num = (v: string | undefined): number | undefined => (v === undefined ? undefined : Number(v));
  const fromFlags = Object.fromEntries(
    Object.entries({
      port: num(values.port),
      host: values.host,
      dataset: values.dataset,
      cacheDir: values['cache-dir'],
      skipMissingDbs: values['skip-missing-dbs'],
      apiKey: values['api-key'],
      mode: values.mode,
      allowedHosts: values['allowed-hosts'] === undefined ? undefined : splitList(values['allowed-hosts']),
      maxSessions: num(values['max-sessions']),
      idleTimeoutS: num(values['idle-timeout-s']),
      web: values['no-web'] === true ? false : undefined,
      logLevel: values['log-level'],
    }).filter(([, v]) => v !== undefined),
  );
  const parsed = ServeConfigSchema.safeParse({ ...fromEnv.data, ...fromFlags });
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

/**
 * `sqlenv serve [...]` for the CLI: parse flags over env vars, serve until a
 * signal. Returns the process exit code (0 after a clean shutdown, 2 on bad options).
 */
export async function serveCommand(
  argv: readonly string[],
  io: { env?: Record<string, string | undefined>; logger?: Logger; stdout?: (text: string) => void; stderr?: (text: string) => void } = {},
): Promise<number> {
  const stdout = io.stdout ?? ((text: string) => void process.stdout.write(text));
  const stderr = io.stderr ?? ((text: string) => void process.stderr.write(text));
  let config: ServeConfig | 'help';
  try {
    config = parseServeConfig(argv, io.env ?? process.env);
  } catch (error) {
    stderr(`${error instanceof Error ? error.message : String(error)}\n\n${SERVE_USAGE}`);
    return 2;
  }
  if (config === 'help') {
    stdout(SERVE_USAGE);
    return 0;
  }
  const logger = io.logger ?? createRootLogger('env-server', { level: config.logLevel });
  await serveUntilSignal(config, logger);
  return 0;
}
