import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Redis } from 'ioredis';
import { AppError, ErrorCode } from '@sqlenv/shared';

/**
 * Bytes addressed by key: trajectories and weight blobs. Keys are
 * '/'-separated paths whose first segment is the run id
 * (`<run>/traj/<episode>`, `<run>/weights/v<version>`).
 */
export interface BlobStore {
  put(key: string, data: Buffer): Promise<void>;
  get(key: string): Promise<Buffer | undefined>;
  /** Several blobs at once, in key order (one Redis round trip for the trainer's batch). */
  getMany(keys: readonly string[]): Promise<Array<Buffer | undefined>>;
  delete(key: string): Promise<void>;
}

/** In-process store for the embedded transport. */
export class MemoryBlobStore implements BlobStore {
  readonly #blobs = new Map<string, Buffer>();

  put(key: string, data: Buffer): Promise<void> {
    this.#blobs.set(key, Buffer.from(data));
    return Promise.resolve();
  }

  get(key: string): Promise<Buffer | undefined> {
    return Promise.resolve(this.#blobs.get(key));
  }

  getMany(keys: readonly string[]): Promise<Array<Buffer | undefined>> {
    return Promise.resolve(keys.map((key) => this.#blobs.get(key)));
  }

  delete(key: string): Promise<void> {
    this.#blobs.delete(key);
    return Promise.resolve();
  }

  get size(): number {
    return this.#blobs.size;
  }
}

/**
 * Files under a directory (a shared volume in docker; an S3-compatible store
 * would implement the same interface). Writes go to a temporary file and are
 * renamed into place, so a reader never sees half a blob.
 */
export class DirectoryBlobStore implements BlobStore {
  readonly #dir: string;

  constructor(dir: string) {
    this.#dir = path.resolve(dir);
  }

  #path(key: string): string {
    const segments = key.split('/').map((s) => encodeURIComponent(s));
    if (segments.some((s) => s === '' || s === '.' || s === '..')) throw new AppError(ErrorCode.VALIDATION, `bad blob key: ${key}`);
    return path.join(this.#dir, ...segments);
  }

  async put(key: string, data: Buffer): Promise<void> {
    const file = this.#path(key);
    await mkdir(path.dirname(file), { recursive: true });
    const tmp = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
    await writeFile(tmp, data);
    await rename(tmp, file);
  }

  async get(key: string): Promise<Buffer | undefined> {
    try {
      return await readFile(this.#path(key));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  }

  getMany(keys: readonly string[]): Promise<Array<Buffer | undefined>> {
    return Promise.all(keys.map((key) => this.get(key)));
  }

  async delete(key: string): Promise<void> {
    await rm(this.#path(key), { force: true });
  }
}

export interface RedisBlobStoreOptions {
  /** Maps a blob key to its Redis key (the BullMQ transport puts the run's hash tag in it). */
  redisKey: (key: string) => string;
  /** Blobs larger than this go to `spill` and Redis keeps a pointer. Bytes; the transport's schema sets the default. */
  maxInlineBytes: number;
  /** Where big blobs go; without one, a big blob is an error (Redis carries control data, not bulk data). */
  spill?: BlobStore;
}

// One tag byte in front of every value: inline bytes, or a pointer to the spill store.
const INLINE = 0x69; // 'i'
const SPILLED = 0x73; // 's'

/** Small blobs inline in Redis, big ones in a spill store (DESIGN.md "Scaling"). */
export class RedisBlobStore implements BlobStore {
  readonly #redis: Redis;
  readonly #options: RedisBlobStoreOptions;

  constructor(redis: Redis, options: RedisBlobStoreOptions) {
    this.#redis = redis;
    this.#options = options;
  }

  async put(key: string, data: Buffer): Promise<void> {
    const { redisKey, value } = await this.encode(key, data);
    await this.#redis.set(redisKey, value);
  }

  /**
   * The Redis key and value that store `data` under `key` (spilling it first when it is big), for a
   * caller that writes it together with other commands in one MULTI.
   */
  async encode(key: string, data: Buffer): Promise<{ redisKey: string; value: Buffer }> {
    const redisKey = this.#options.redisKey(key);
    if (data.length <= this.#options.maxInlineBytes) return { redisKey, value: Buffer.concat([Buffer.of(INLINE), data]) };
    const spill = this.#options.spill;
    if (!spill) {
      throw new AppError(ErrorCode.CAPACITY, `blob ${key} is ${data.length} bytes, over the ${this.#options.maxInlineBytes}-byte inline bound, and no spill directory is configured`);
    }
    await spill.put(key, data);
    return { redisKey, value: Buffer.concat([Buffer.of(SPILLED), Buffer.from(key)]) };
  }

  async get(key: string): Promise<Buffer | undefined> {
    return this.#decode(key, await this.#redis.getBuffer(this.#options.redisKey(key)));
  }

  /** One MGET: the keys must share a hash slot on a cluster (the transport's keys of one run do). */
  async getMany(keys: readonly string[]): Promise<Array<Buffer | undefined>> {
    if (keys.length === 0) return [];
    const values = await this.#redis.mgetBuffer(...keys.map((key) => this.#options.redisKey(key)));
    return Promise.all(keys.map((key, i) => this.#decode(key, values[i] ?? null)));
  }

  async #decode(key: string, value: Buffer | null): Promise<Buffer | undefined> {
    if (value === null || value.length === 0) return undefined;
    if (value[0] === INLINE) return value.subarray(1);
    if (value[0] === SPILLED && this.#options.spill) return this.#options.spill.get(value.subarray(1).toString());
    throw new AppError(ErrorCode.INTERNAL, `blob ${key}: unreadable value (spilled without a spill store?)`);
  }

  async delete(key: string): Promise<void> {
    const redisKey = this.#options.redisKey(key);
    const value = await this.#redis.getBuffer(redisKey);
    if (value !== null && value[0] === SPILLED && this.#options.spill) await this.#options.spill.delete(value.subarray(1).toString());
    await this.#redis.del(redisKey);
  }
}
