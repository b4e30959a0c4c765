import { readApiError } from '@sqlenv/protocol';
import { AppError, ErrorCode, toAppError } from '@sqlenv/shared';
import { ServerUnreachableError, type HttpReply } from './http-call.ts';
import type { InferencePool, InferenceServer } from './inference-pool.ts';

export interface AdapterManagerOptions {
  /** The served base model (`--inference-model`, or the root model the servers list). */
  baseModel: string;
  /** Run whose versions are served as `<run>-v<N>`; absent: only the base model is served (eval, play). */
  runId?: string;
  /** Whether version 0 is a starting adapter (`<run>-v0`) rather than the base model. */
  startAdapter?: boolean;
  /** The adapter share as the servers see it (`--adapter-share-as`, else `--adapter-share`): `<it>/<run>/v<N>`. */
  sharePath?: string;
  /** Adapters loaded per server at most (the run's staleness bound + 2). */
  maxLoaded: number;
}

interface LoadedAdapter {
  loading: Promise<void>;
  /** Requests in flight that sample with it. */
  users: number;
}

/**
 * Policy versions as LoRA adapters on the servers: one name per version
 * (`<run>-v<N>`, never an in-place reload), loaded on a server before the
 * first request that needs it there, unloaded once no request uses it and a
 * newer version is out. A server that lost its adapters (restarted) is
 * re-primed by `reprime`.
 */
export class AdapterManager {
  readonly #pool: InferencePool;
  readonly #options: AdapterManagerOptions;
  readonly #loaded = new Map<InferenceServer, Map<number, LoadedAdapter>>();
  readonly #unloading = new Set<Promise<void>>();
  #newest = 0;

  constructor(pool: InferencePool, options: AdapterManagerOptions) {
    if (options.runId !== undefined && options.sharePath === undefined) throw new AppError(ErrorCode.VALIDATION, `run ${options.runId}: serving its versions needs the adapter share (--adapter-share)`);
    this.#pool = pool;
    this.#options = options;
  }

  /** The model name a request for `version` carries. */
  servedName(version: number): string {
    return this.isBase(version) ? this.#options.baseModel : `${this.#options.runId ?? ''}-v${version}`;
  }

  /** Where the servers read `version`'s adapter. */
  adapterPath(version: number): string {
    return `${(this.#options.sharePath ?? '').replace(/\/+$/, '')}/${this.#options.runId ?? ''}/v${version}`;
  }

  /** Versions loaded on `server` now (tests, logs). */
  loadedOn(server: InferenceServer): number[] {
    return [...(this.#loaded.get(server)?.keys() ?? [])].sort((a, b) => a - b);
  }

  /** Make `version` servable on `server` and count one request using it (until `done`); returns its served name. */
  async use(server: InferenceServer, version: number): Promise<string> {
    this.#newest = Math.max(this.#newest, version);
    if (this.isBase(version)) return this.servedName(version);
    const onServer = this.#onServer(server);
    let entry = onServer.get(version);
    if (entry === undefined) {
      entry = { loading: this.#load(server, version), users: 0 };
      onServer.set(version, entry);
      const loadingEntry = entry;
      // A failed load is forgotten, so the next request tries again.
      entry.loading.catch(() => {
        if (onServer.get(version) === loadingEntry) onServer.delete(version);
      });
    }
    entry.users += 1;
    try {
      await entry.loading;
    } catch (error) {
      entry.users -= 1;
      throw error;
    }
    this.#prune(server);
    return this.servedName(version);
  }

  /** One request that `use`d `version` on `server` is over. */
  done(server: InferenceServer, version: number): void {
    const entry = this.#loaded.get(server)?.get(version);
    if (entry !== undefined) entry.users = Math.max(0, entry.users - 1);
    this.#prune(server);
  }

  /** The server answered "does not exist" for a version this process loaded there: load it again. */
  async reprime(server: InferenceServer, version: number): Promise<void> {
    const entry = this.#loaded.get(server)?.get(version);
    const loading = this.#load(server, version);
    if (entry !== undefined) entry.loading = loading;
    await loading;
  }

  /**
   * Unload every adapter this process loaded (it leaves the run). Another process still sampling
   * one of them gets "does not exist" and re-primes the server: nothing is lost but a load.
   */
  async unloadAll(): Promise<void> {
    const loaded = [...this.#loaded].flatMap(([server, versions]) => [...versions.keys()].map((version) => ({ server, version })));
    this.#loaded.clear();
    await this.settled();
    await Promise.allSettled(loaded.map(({ server, version }) => this.#unload(server, version)));
  }

  /** Wait for the unloads under way (tests, shutdown). */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.#unloading]);
  }

  /** Whether `version` samples with the base model (no adapter to load). */
  isBase(version: number): boolean {
    return this.#options.runId === undefined || (version === 0 && this.#options.startAdapter !== true);
  }

  #onServer(server: InferenceServer): Map<number, LoadedAdapter> {
    let map = this.#loaded.get(server);
    if (map === undefined) {
      map = new Map();
      this.#loaded.set(server, map);
    }
    return map;
  }

  async #load(server: InferenceServer, version: number): Promise<void> {
    const body = { lora_name: this.servedName(version), lora_path: this.adapterPath(version) };
    const reply = await this.#pool.call(server, 'POST', '/v1/load_lora_adapter', body);
    if (reply.status === 200) return;
    // Loaded already (by another worker of the run, or before a reconnect): what was asked for holds.
    if (reply.status === 400 && /already/i.test(reply.text)) return;
    throw serverError(server, `loading ${body.lora_name} from ${body.lora_path}`, reply);
  }

  /** Unload versions older than the newest that no request uses; warn when more than the bound stay loaded. */
  #prune(server: InferenceServer): void {
    const onServer = this.#loaded.get(server);
    if (onServer === undefined) return;
    for (const [version, entry] of onServer) {
      if (version >= this.#newest || entry.users > 0) continue;
      onServer.delete(version);
      const unloading = entry.loading.then(() => this.#unload(server, version)).catch((error: unknown) => {
        this.#pool.logger.warn({ server: server.url, adapter: this.servedName(version), err: toAppError(error) }, 'could not unload an old adapter');
      });
      this.#unloading.add(unloading);
      void unloading.finally(() => this.#unloading.delete(unloading));
    }
    if (onServer.size > this.#options.maxLoaded) {
      this.#pool.logger.warn({ server: server.url, loaded: [...onServer.keys()], maxLoaded: this.#options.maxLoaded }, 'more adapters in use on one server than the staleness bound allows');
    }
  }

  async #unload(server: InferenceServer, version: number): Promise<void> {
    const reply = await this.#pool.call(server, 'POST', '/v1/unload_lora_adapter', { lora_name: this.servedName(version) });
    // Unknown there (the server restarted): nothing to unload.
    if (reply.status !== 200 && reply.status !== 404) throw serverError(server, `unloading ${this.servedName(version)}`, reply);
  }
}

/** An error answer of a server as an AppError (5xx: the server may recover, so the caller may retry). */
export function serverError(server: InferenceServer, what: string, reply: HttpReply): AppError {
  const message = `${server.url}: ${what} failed with HTTP ${reply.status}: ${errorMessage(reply)}`;
  if (reply.status >= 500) return new ServerUnreachableError(ErrorCode.TRANSPORT, message);
  if (reply.status === 401 || reply.status === 403) return new AppError(ErrorCode.UNAUTHORIZED, `${message} (check --inference-api-key)`);
  return new AppError(reply.status === 404 ? ErrorCode.NOT_FOUND : ErrorCode.MODEL, message);
}

/** The message of a vLLM error body, else the body itself (clipped). */
export function errorMessage(reply: HttpReply): string {
  try {
    const parsed = readApiError(JSON.parse(reply.text));
    if (parsed !== null) return parsed.message;
  } catch {
    // Not JSON (plain-text errors): shown as they are.
  }
  return reply.text.length > 300 ? `${reply.text.slice(0, 300)}…` : reply.text;
}
