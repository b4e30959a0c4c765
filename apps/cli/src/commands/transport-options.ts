import { z } from 'zod';
import { booleanText, type FlagSpec } from '../flags.ts';

/** Options every distributed app shares: where Redis is, how keys are named, job lock timings, metrics. */
export const transportOptionSpecs: Record<string, FlagSpec> = {
  redis: { key: 'redisUrl', env: 'REDIS_URL' },
  'key-base': { key: 'keyBase', env: 'SQLENV_KEY_BASE' },
  'blob-store': { key: 'blobStore', env: 'SQLENV_BLOB_STORE' },
  'spill-dir': { key: 'spillDir', env: 'SQLENV_SPILL_DIR' },
  'max-inline-bytes': { key: 'maxInlineBytes', env: 'SQLENV_MAX_INLINE_BYTES' },
  'lock-duration-ms': { key: 'lockDurationMs', env: 'SQLENV_LOCK_DURATION_MS' },
  'stalled-interval-ms': { key: 'stalledIntervalMs', env: 'SQLENV_STALLED_INTERVAL_MS' },
  'max-stalled-count': { key: 'maxStalledCount', env: 'SQLENV_MAX_STALLED_COUNT' },
  'metrics-port': { key: 'metricsPort', env: 'METRICS_PORT' },
  'metrics-host': { key: 'metricsHost', env: 'SQLENV_METRICS_HOST' },
  'log-level': { key: 'logLevel', env: 'LOG_LEVEL' },
  'poll-ms': { key: 'pollMs', env: 'SQLENV_POLL_MS' },
  'health-ping-timeout-ms': { key: 'healthPingTimeoutMs', env: 'SQLENV_HEALTH_PING_TIMEOUT_MS' },
  'health-max-loop-lag-ms': { key: 'healthMaxLoopLagMs', env: 'SQLENV_HEALTH_MAX_LOOP_LAG_MS' },
};

const int = z.coerce.number().int();

/** Transport fields are left undefined when not given: BullmqTransportConfigSchema holds their defaults. */
export const TransportOptionsSchema = z.object({
  redisUrl: z.string().min(1).optional(),
  keyBase: z.string().optional(),
  blobStore: z.enum(['redis', 'dir']).optional(),
  spillDir: z.string().optional(),
  maxInlineBytes: int.positive().optional(),
  lockDurationMs: int.positive().optional(),
  stalledIntervalMs: int.positive().optional(),
  maxStalledCount: int.nonnegative().optional(),
  /** Serve /metrics and /status on this port (0 = any free port); none when unset. */
  metricsPort: int.min(0).max(65_535).optional(),
  /**
   * Address the status server binds. Loopback by default: /status shows the run spec and nothing
   * on it asks for credentials, so serving it to the network is an explicit choice (containers set
   * 0.0.0.0 so Prometheus and the compose healthcheck reach it; docs/security.md, "Metrics endpoint").
   */
  metricsHost: z.string().min(1).default('127.0.0.1'),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** Fallback poll interval of the control loops, in milliseconds (notices wake them sooner). */
  pollMs: int.positive().default(250),
  /** /healthz: a Redis PING slower than this is an outage, in milliseconds. */
  healthPingTimeoutMs: int.positive().default(2_000),
  /** /healthz: an event-loop stall longer than this since the last check is unhealthy, in milliseconds. */
  healthMaxLoopLagMs: int.positive().default(10_000),
});
export type TransportOptions = z.infer<typeof TransportOptionsSchema>;

/** The BullmqTransport config from parsed options, without the undefined fields. */
export function transportConfig(options: Partial<Pick<TransportOptions, 'redisUrl' | 'keyBase' | 'blobStore' | 'spillDir' | 'maxInlineBytes' | 'lockDurationMs' | 'stalledIntervalMs' | 'maxStalledCount'>>): Record<string, string | number> {
  const out: Record<string, string | number> = {};
  for (const key of ['redisUrl', 'keyBase', 'blobStore', 'spillDir', 'maxInlineBytes', 'lockDurationMs', 'stalledIntervalMs', 'maxStalledCount'] as const) {
    const value = options[key];
    if (value !== undefined) out[key] = value;
  }
  return out;
}

/** Environment options of the SQL runtime (dataset cache, executor pool). */
export const runtimeOptionSpecs: Record<string, FlagSpec> = {
  'cache-dir': { key: 'cacheDir', env: 'SQLENV_CACHE_DIR' },
  'executor-pool-size': { key: 'executorPoolSize', env: 'SQLENV_EXECUTOR_POOL_SIZE' },
  'executor-in-process-max-ms': { key: 'executorInProcessMaxMs', env: 'SQLENV_EXECUTOR_IN_PROCESS_MAX_MS' },
  'skip-missing-dbs': { key: 'skipMissingDbs', env: 'SQLENV_SKIP_MISSING_DBS', type: 'boolean' },
};

export const RuntimeOptionsSchema = z.object({
  cacheDir: z.string().optional(),
  executorPoolSize: int.positive().optional(),
  executorInProcessMaxMs: z.coerce.number().min(0).max(100).optional(),
  /** Play without the databases whose file is missing or empty (they are logged) instead of refusing the dataset. */
  skipMissingDbs: booleanText.optional(),
});
