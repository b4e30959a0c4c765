import { z } from 'zod';
import { AppError, ErrorCode, silentLogger, type Logger } from '@sqlenv/shared';
import { httpCall, ServerUnreachableError, type HttpReply } from './http-call.ts';

export const InferencePoolConfigSchema = z.object({
  /** Base URLs of the servers (`http://host:port`, no `/v1`). */
  urls: z.array(z.url({ protocol: /^https?$/ })).min(1),
  /** Sent as `Authorization: Bearer` (vLLM `--api-key`). */
  apiKey: z.string().min(1).optional(),
  /** Requests in flight per server; more wait here. */
  concurrency: z.number().int().positive().default(64),
  /** One request, connection to last byte, in milliseconds (a long completion on a busy server included). */
  timeoutMs: z.number().int().positive().default(300_000),
  /** Largest answer read, in bytes (a whole-context echo of `prompt_token_ids` fits many times over). */
  maxResponseBytes: z.number().int().positive().default(16 * 1024 * 1024),
  /** Retries on one server (refused, reset, 5xx, timeout) before its episodes move to another. */
  retries: z.number().int().nonnegative().default(2),
  /** First backoff between retries, in milliseconds; doubled each retry up to `maxBackoffMs`. */
  backoffMs: z.number().int().nonnegative().default(250),
  maxBackoffMs: z.number().int().nonnegative().default(4_000),
  /** How long a server that failed is passed over for new episodes, in milliseconds. */
  coolDownMs: z.number().int().nonnegative().default(10_000),
});
export type InferencePoolConfig = z.input<typeof InferencePoolConfigSchema>;
type PoolSettings = z.output<typeof InferencePoolConfigSchema>;

/** One server of the pool and what this process has on it. */
export class InferenceServer {
  readonly url: string;
  readonly index: number;
  /** Episodes whose turns go here. */
  episodes = 0;
  inFlight = 0;
  failedUntilMs = 0;
  readonly #waiting: Array<() => void> = [];

  constructor(url: string, index: number) {
    this.url = url.replace(/\/+$/, '');
    this.index = index;
  }

  async acquire(limit: number): Promise<void> {
    if (this.inFlight < limit) {
      this.inFlight += 1;
      return;
    }
    // The slot is handed over by release(): inFlight stays counted.
    await new Promise<void>((resolve) => this.#waiting.push(resolve));
  }

  release(): void {
    const next = this.#waiting.shift();
    if (next === undefined) this.inFlight -= 1;
    else next();
  }
}

/**
 * The inference servers of a process: a bounded number of requests in flight
 * per server, the least loaded server for each new episode, retries with
 * backoff and failover for an episode whose server stops answering.
 */
export class InferencePool {
  readonly servers: readonly InferenceServer[];
  readonly settings: PoolSettings;
  readonly #logger: Logger;

  constructor(config: InferencePoolConfig, logger: Logger = silentLogger) {
    this.settings = InferencePoolConfigSchema.parse(config);
    this.servers = this.settings.urls.map((url, i) => new InferenceServer(url, i));
    this.#logger = logger.child({ component: 'inference-pool' });
  }

  /** The least loaded server not in `exclude` (healthy ones first), counted as holding one more episode. */
  assign(exclude: ReadonlySet<InferenceServer> = new Set()): InferenceServer | undefined {
    const now = Date.now();
    const candidates = this.servers.filter((s) => !exclude.has(s));
    const healthy = candidates.filter((s) => s.failedUntilMs <= now);
    const chosen = (healthy.length > 0 ? healthy : candidates).reduce<InferenceServer | undefined>((best, s) => (best === undefined || load(s) < load(best) ? s : best), undefined);
    if (chosen !== undefined) chosen.episodes += 1;
    return chosen;
  }

  unassign(server: InferenceServer): void {
    server.episodes = Math.max(0, server.episodes - 1);
  }

  markFailed(server: InferenceServer, reason: string): void {
    server.failedUntilMs = Date.now() + this.settings.coolDownMs;
    this.#logger.warn({ server: server.url, reason, coolDownMs: this.settings.coolDownMs }, 'inference server failed; its episodes move to another');
  }

  /** One HTTP call to `server`, waiting for one of its request slots. */
  async call(server: InferenceServer, method: 'GET' | 'POST', path: string, body?: unknown, requestId?: string): Promise<HttpReply> {
    await server.acquire(this.settings.concurrency);
    try {
      return await httpCall({
        method,
        url: `${server.url}${path}`,
        ...(body === undefined ? {} : { body }),
        ...(this.settings.apiKey === undefined ? {} : { apiKey: this.settings.apiKey }),
        ...(requestId === undefined ? {} : { requestId }),
        timeoutMs: this.settings.timeoutMs,
        maxResponseBytes: this.settings.maxResponseBytes,
      });
    } finally {
      server.release();
    }
  }

  /** The wait before retry `attempt` (0-based) on the same server, in milliseconds. */
  backoffMs(attempt: number): number {
    return Math.min(this.settings.maxBackoffMs, this.settings.backoffMs * 2 ** attempt);
  }

  get logger(): Logger {
    return this.#logger;
  }
}

function load(server: InferenceServer): number {
  // Episodes first (each will send turns), then what is queued now; ties go to the first listed.
  return server.episodes * 1_000_000 + server.inFlight;
}

/**
 * One episode's server: every turn goes to the same one (its prefix cache
 * holds the episode's context); when it stops answering after the retries,
 * the episode moves to the least loaded other server. No server left: the
 * turn fails (the episode fails, and the rollout layer retries its job).
 */
export class StickyServer {
  readonly #pool: InferencePool;
  #server: InferenceServer | undefined;
  #closed = false;

  constructor(pool: InferencePool) {
    this.#pool = pool;
  }

  get server(): InferenceServer | undefined {
    return this.#server;
  }

  async run<T>(label: string, attempt: (server: InferenceServer, attemptIndex: number) => Promise<T>): Promise<T> {
    if (this.#closed) throw new AppError(ErrorCode.EPISODE_STATE, `${label}: the episode's server slot was released`);
    const tried = new Set<InferenceServer>();
    const failures: string[] = [];
    let attempts = 0;
    for (let server = this.#current(tried); server !== undefined; server = this.#moveFrom(server, tried)) {
      for (let retry = 0; retry <= this.#pool.settings.retries; retry++) {
        try {
          return await attempt(server, attempts++);
        } catch (error) {
          if (!(error instanceof ServerUnreachableError)) throw error;
          failures.push(error.message);
          if (retry < this.#pool.settings.retries) await sleep(this.#pool.backoffMs(retry));
        }
      }
      this.#pool.markFailed(server, failures.at(-1) ?? 'unknown');
      tried.add(server);
    }
    throw new AppError(ErrorCode.TRANSPORT, `${label}: no inference server answered (${this.#pool.servers.length} tried): ${failures.join('; ')}`);
  }

  /** Release the episode's place on its server. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#server !== undefined) this.#pool.unassign(this.#server);
    this.#server = undefined;
  }

  #current(tried: ReadonlySet<InferenceServer>): InferenceServer | undefined {
    this.#server ??= this.#pool.assign(tried);
    return this.#server;
  }

  #moveFrom(server: InferenceServer, tried: Set<InferenceServer>): InferenceServer | undefined {
    tried.add(server);
    this.#pool.unassign(server);
    this.#server = this.#pool.assign(tried);
    return this.#server;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
