import { z } from 'zod';

const MIB = 1024 * 1024;

/**
 * Limits and behaviour of one server instance. The only place defaults live:
 * the CLI, the env-var entrypoint and tests all parse through this schema.
 */
export const EnvServerLimitsSchema = z.strictObject({
  /** Concurrent sessions (WebSocket + HTTP), OpenEnv's max_concurrent_envs. */
  maxSessions: z.number().int().positive().default(1024),
  /** Sessions idle longer than this are reaped; 0 disables reaping. Seconds. */
  idleTimeoutS: z.number().nonnegative().default(600),
  /** Largest WebSocket frame answered normally; bigger ones get an error frame. Bytes. */
  maxFrameBytes: z.number().int().positive().default(MIB),
  /** Largest HTTP request body; bigger ones get 413. Bytes. */
  maxBodyBytes: z.number().int().positive().default(MIB),
  /** Requests queued on one session before the server stops reading its socket (backpressure). */
  maxQueuedRequests: z.number().int().positive().default(16),
  /** How long close() waits for in-flight requests before cutting sessions off. Milliseconds. */
  shutdownGraceMs: z.number().int().nonnegative().default(5000),
  /** Bearer token required on every route and on /ws; unset = no auth. */
  apiKey: z.string().min(1).optional(),
  /**
   * Host names accepted in the Host header of HTTP requests and in the Origin
   * of browsers (WebSocket handshakes and HTTP requests that carry one), on
   * top of the loopback names (localhost, *.localhost, 127.0.0.1, [::1]),
   * which are always accepted, as are IP-literal Host headers and the server's
   * own origin (host-policy.ts says why). `.name` also accepts subdomains; `*`
   * accepts any host (behind a proxy that checks it). Any port matches.
   */
  allowedHosts: z.array(z.string().trim().min(1).toLowerCase()).default([]),
  /** Serve the /web page and its catalog. */
  web: z.boolean().default(true),
});
export type EnvServerLimits = z.infer<typeof EnvServerLimitsSchema>;
export type EnvServerLimitsInput = z.input<typeof EnvServerLimitsSchema>;

/** A served process: where to listen and which dataset to load, plus the limits. */
export const ServeConfigSchema = EnvServerLimitsSchema.extend({
  port: z.number().int().min(0).max(65_535).default(8000),
  /** Loopback by default: exposing the server is an explicit choice. */
  host: z.string().min(1).default('127.0.0.1'),
  /** 'builtin' or a directory in Spider layout. */
  dataset: z.string().min(1).default('builtin'),
  /**
   * `eval`: clients get the terminal reward only (0 until the episode ends), so
   * the progress shaping, which scores queries against the gold answer, cannot be
   * probed; the shaping is still computed and logged. `train`: the shaped reward,
   * what RL trainers (TRL) need. Eval by default: a leak must be asked for.
   */
  mode: z.enum(['eval', 'train']).default('eval'),
  /** Where the builtin dataset is generated; the sql-env default when unset. */
  cacheDir: z.string().min(1).optional(),
  /** Serve without the databases whose file is missing or empty (logged) instead of refusing to start. */
  skipMissingDbs: z.boolean().default(false),
  /** SQL executor child processes (the sql-env default when unset). */
  executorPoolSize: z.number().int().positive().max(64).optional(),
  /** The SQL executor's in-process fast path bound in ms (0 = every query through a child; the sql-env default when unset). */
  executorInProcessMaxMs: z.number().min(0).max(100).optional(),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});
export type ServeConfig = z.infer<typeof ServeConfigSchema>;

const envNumber = z.coerce.number();
const envBoolean = z.enum(['1', '0', 'true', 'false', 'yes', 'no']).transform((v) => v === '1' || v === 'true' || v === 'yes');

/**
 * Environment variables of the Docker entrypoint (apps/env-server/src/main.ts),
 * mapped onto ServeConfig input. Unset variables are left out so the schema
 * defaults (or command-line flags) apply.
 */
export const ServeEnvSchema = z
  .looseObject({
    PORT: envNumber.optional(),
    HOST: z.string().optional(),
    SQLENV_DATASET: z.string().optional(),
    SQLENV_CACHE_DIR: z.string().optional(),
    SQLENV_SKIP_MISSING_DBS: envBoolean.optional(),
    SQLENV_API_KEY: z.string().optional(),
    SQLENV_ALLOWED_HOSTS: z.string().optional(),
    SQLENV_MODE: z.string().optional(),
    SQLENV_MAX_SESSIONS: envNumber.optional(),
    SQLENV_IDLE_TIMEOUT_S: envNumber.optional(),
    SQLENV_MAX_FRAME_BYTES: envNumber.optional(),
    SQLENV_MAX_BODY_BYTES: envNumber.optional(),
    SQLENV_WEB: envBoolean.optional(),
    SQLENV_EXECUTOR_POOL_SIZE: envNumber.optional(),
    SQLENV_EXECUTOR_IN_PROCESS_MAX_MS: envNumber.optional(),
    LOG_LEVEL: z.string().optional(),
  })
  .transform((env) =>
    dropUndefined({
      port: env.PORT,
      host: env.HOST,
      dataset: env.SQLENV_DATASET,
      cacheDir: env.SQLENV_CACHE_DIR,
      skipMissingDbs: env.SQLENV_SKIP_MISSING_DBS,
      // An empty SQLENV_API_KEY (common in compose files) means "no auth", not "empty token".
      apiKey: env.SQLENV_API_KEY === '' ? undefined : env.SQLENV_API_KEY,
      allowedHosts: env.SQLENV_ALLOWED_HOSTS === undefined ? undefined : splitList(env.SQLENV_ALLOWED_HOSTS),
      mode: env.SQLENV_MODE,
      maxSessions: env.SQLENV_MAX_SESSIONS,
      idleTimeoutS: env.SQLENV_IDLE_TIMEOUT_S,
      maxFrameBytes: env.SQLENV_MAX_FRAME_BYTES,
      maxBodyBytes: env.SQLENV_MAX_BODY_BYTES,
      web: env.SQLENV_WEB,
      executorPoolSize: env.SQLENV_EXECUTOR_POOL_SIZE,
      executorInProcessMaxMs: env.SQLENV_EXECUTOR_IN_PROCESS_MAX_MS,
      logLevel: env.LOG_LEVEL,
    }),
  );

/** `a, b,c` → ['a', 'b', 'c']; empty items dropped. */
export function splitList(value: string): string[] {
  return value
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
}

function dropUndefined<T extends Record<string, unknown>>(record: T): { [K in keyof T]?: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(record).filter(([, v]) => v !== undefined)) as { [K in keyof T]?: Exclude<T[K], undefined> };
}
