import { Redis } from 'ioredis';
import { RolloutRunSpecSchema, RunIdSchema, type RolloutRunSpec } from '@sqlenv/protocol';
import { AppError, ErrorCode, appendAll } from '@sqlenv/shared';
import { DirectoryBlobStore } from '../store/blob-store.ts';
import { BullmqTransportConfigSchema } from './bullmq-transport.ts';
import { RunKeys } from './run-keys.ts';

export interface RunListing {
  run_id: string;
  registered_at: string;
  /**
   * 'active' (not done), 'done', 'expired' (its keys are gone; the listing entry is removed), or
   * 'invalid': the listing holds a name that is not a run id (written by something else), which no
   * admin command turns into a key pattern; `runs delete` cannot name it, so the listing forgets it.
   */
  state: 'active' | 'done' | 'expired' | 'invalid';
  policy_version: number;
  episodes: number | null;
  /** Seconds until a finished run's keys expire (null: no expiry set). */
  expires_in_s: number | null;
}

export interface RunDetails extends RunListing {
  spec: RolloutRunSpec;
  state_fields: Record<string, string>;
  keys: number;
  /** Sum of MEMORY USAGE over the run's keys, in bytes. */
  memory_bytes: number;
  weights: Array<{ version: number; key: string }>;
  checkpoints: Record<string, string>;
  scored_pending: number;
  trash_pending: number;
}

/**
 * Runs as an operator sees them in Redis (`sqlenv runs …`): list, inspect, expire and delete every
 * key of a run. Every key of a run starts with `<keyBase>:{<run id>}:`, so a SCAN with that prefix
 * finds them all (BullMQ's queues included); a spill directory (SQLENV_BLOB_STORE=dir) holds a
 * run's blobs under `<dir>/<run id>/`.
 */
export class RunAdmin {
  readonly #redis: Redis;
  readonly #keyBase: string;
  readonly #spill: DirectoryBlobStore | undefined;

  constructor(options: { redisUrl: string; keyBase: string; spillDir?: string }) {
    this.#redis = new Redis(options.redisUrl, { maxRetriesPerRequest: 3, connectionName: 'sqlenv-runs' });
    this.#redis.on('error', () => undefined);
    // The key base starts every SCAN pattern: the transport's schema keeps it to a glob-free alphabet.
    this.#keyBase = BullmqTransportConfigSchema.shape.keyBase.parse(options.keyBase);
    this.#spill = options.spillDir === undefined ? undefined : new DirectoryBlobStore(options.spillDir);
  }

  get #allRuns(): string {
    return `${this.#keyBase}:all-runs`;
  }

  async list(): Promise<RunListing[]> {
    const entries = await this.#redis.zrange(this.#allRuns, 0, -1, 'WITHSCORES');
    const out: RunListing[] = [];
    for (let i = 0; i + 1 < entries.length; i += 2) {
      const runId = entries[i] as string;
      const registeredMs = Number(entries[i + 1]);
      const listing = RunIdSchema.safeParse(runId).success
        ? await this.#listing(runId, registeredMs)
        : { run_id: runId, registered_at: new Date(registeredMs).toISOString(), state: 'invalid' as const, policy_version: 0, episodes: null, expires_in_s: null };
      out.push(listing);
      // An expired run's entry goes with it (its keys are already gone), and so does a name that is no run id.
      if (listing.state === 'expired' || listing.state === 'invalid') await this.#redis.zrem(this.#allRuns, listing.run_id);
    }
    return out;
  }

  async #listing(runId: string, registeredMs: number): Promise<RunListing> {
    const keys = new RunKeys(this.#keyBase, runId);
    const [spec, state, ttlMs] = await Promise.all([this.#redis.get(keys.spec), this.#redis.hgetall(keys.state), this.#redis.pttl(keys.spec)]);
    const parsed = spec === null ? undefined : RolloutRunSpecSchema.safeParse(JSON.parse(spec)).data;
    return {
      run_id: runId,
      registered_at: new Date(registeredMs).toISOString(),
      state: spec === null ? 'expired' : state['done'] === '1' ? 'done' : 'active',
      policy_version: Number(state['version'] ?? 0),
      episodes: parsed?.episodes ?? null,
      expires_in_s: ttlMs > 0 ? Math.round(ttlMs / 1000) : null,
    };
  }

  async show(runId: string): Promise<RunDetails> {
    const keys = new RunKeys(this.#keyBase, runId);
    const raw = await this.#redis.get(keys.spec);
    if (raw === null) throw new AppError(ErrorCode.NOT_FOUND, `no run ${runId} under key base ${this.#keyBase} (deleted, expired, or never started)`);
    const spec = RolloutRunSpecSchema.parse(JSON.parse(raw));
    const registered = await this.#redis.zscore(this.#allRuns, runId);
    const listing = await this.#listing(runId, registered === null ? 0 : Number(registered));
    const runKeys = await this.#scan(keys);
    let memory = 0;
    for (let i = 0; i < runKeys.length; i += 256) {
      const pipeline = this.#redis.pipeline();
      for (const key of runKeys.slice(i, i + 256)) pipeline.memory('USAGE', key);
      for (const [, value] of (await pipeline.exec()) ?? []) memory += Number(value ?? 0);
    }
    const [state, weights, checkpoints, scored, trash] = await Promise.all([
      this.#redis.hgetall(keys.state),
      this.#redis.zrange(keys.weights, 0, -1, 'WITHSCORES'),
      this.#redis.hgetall(keys.checkpoints),
      this.#redis.zcard(keys.scored),
      this.#redis.llen(keys.trash),
    ]);
    const history: Array<{ version: number; key: string }> = [];
    for (let i = 0; i + 1 < weights.length; i += 2) history.push({ key: weights[i] as string, version: Number(weights[i + 1]) });
    return { ...listing, spec, state_fields: state, keys: runKeys.length, memory_bytes: memory, weights: history, checkpoints, scored_pending: scored, trash_pending: trash };
  }

  /** Pin the committed weights of `version` (default: the current one) under `name`: never pruned. */
  async checkpoint(runId: string, name: string, version?: number): Promise<{ name: string; version: number; key: string }> {
    const keys = new RunKeys(this.#keyBase, runId);
    const current = Number((await this.#redis.hget(keys.state, 'version')) ?? 0);
    const wanted = version ?? current;
    const [key] = await this.#redis.zrangebyscore(keys.weights, wanted, wanted);
    if (key === undefined) throw new AppError(ErrorCode.NOT_FOUND, `run ${runId} has no retained weights for version ${wanted} (pruned, or not trained yet)`);
    await this.#redis.hset(keys.checkpoints, name, key);
    return { name, version: wanted, key };
  }

  /** Let a finished run's keys expire after `ttlS` seconds. Refuses an active run. */
  async expire(runId: string, ttlS: number): Promise<number> {
    const keys = new RunKeys(this.#keyBase, runId);
    if ((await this.#redis.hget(keys.state, 'done')) !== '1') throw new AppError(ErrorCode.VALIDATION, `run ${runId} is not done; only a finished run expires`);
    const runKeys = await this.#scan(keys);
    for (let i = 0; i < runKeys.length; i += 256) {
      const pipeline = this.#redis.pipeline();
      for (const key of runKeys.slice(i, i + 256)) pipeline.expire(key, ttlS);
      await pipeline.exec();
    }
    return runKeys.length;
  }

  /** Delete every key of a run (and its spilled blobs). An active run only with `force`. */
  async delete(runId: string, options: { force?: boolean } = {}): Promise<number> {
    const keys = new RunKeys(this.#keyBase, runId);
    const done = await this.#redis.hget(keys.state, 'done');
    if (done !== '1' && (await this.#redis.exists(keys.spec)) === 1 && options.force !== true) {
      throw new AppError(ErrorCode.VALIDATION, `run ${runId} is still active (its workers and trainer would fail); stop it first or pass --force`);
    }
    const runKeys = await this.#scan(keys);
    for (let i = 0; i < runKeys.length; i += 256) await this.#redis.unlink(...runKeys.slice(i, i + 256));
    await this.#redis.zrem(this.#allRuns, runId);
    await this.#redis.srem(`${this.#keyBase}:runs`, runId);
    await this.#spill?.deletePrefix(runId);
    return runKeys.length;
  }

  async #scan(keys: RunKeys): Promise<string[]> {
    const found: string[] = [];
    let cursor = '0';
    do {
      const [next, batch] = await this.#redis.scan(cursor, 'MATCH', keys.pattern, 'COUNT', 1000);
      cursor = next;
      appendAll(found, batch);
    } while (cursor !== '0');
    return found;
  }

  async close(): Promise<void> {
    await this.#redis.quit().catch(() => this.#redis.disconnect());
  }
}
