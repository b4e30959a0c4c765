import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { AppError, ErrorCode } from '@sqlenv/shared';
import type { BlobStore } from './blob-store.ts';

export interface RedisBlobStoreOptions {
  /** Maps a blob key to its Redis key (the BullMQ transport puts the run's hash tag in it). */
  redisKey: (key: string) => string;
  /** Blobs up to this size are one Redis value. Bytes; the transport's schema sets the default. */
  maxInlineBytes: number;
  /**
   * Where bigger blobs go: 'chunks' (default) = in Redis, split into `chunkBytes` pieces, so every
   * process that reaches Redis reads them, on any host; a BlobStore = that store (a shared
   * directory), with a pointer in Redis.
   */
  large?: 'chunks' | BlobStore;
  /** Size of one chunk, in bytes (each chunk is one SET, so Redis never blocks long on one command). */
  chunkBytes?: number;
}

// One tag byte in front of every value: inline bytes, a pointer to the spill store, or a chunk manifest.
const INLINE = 0x69; // 'i'
const SPILLED = 0x73; // 's'
const CHUNKED = 0x63; // 'c'
const DEFAULT_CHUNK_BYTES = 1024 * 1024;

interface ChunkManifest {
  /** Random per write: a rewrite never mixes its chunks with an earlier write's. */
  id: string;
  chunks: number;
  bytes: number;
}

/**
 * Blobs addressed by key in Redis (docs/architecture.md, "Blobs"). Small blobs are one value; big
 * ones (adapter weights: a rank-16 LoRA of Qwen3-0.6B is ~40 MB) are written as chunks under a
 * fresh id and become visible only when the manifest that names them is set — a reader never sees
 * half a blob, and a reader that raced a rewrite (its chunks deleted under it) reads the new
 * manifest and tries again. All keys of a blob share the blob key's Redis Cluster hash tag.
 */
export class RedisBlobStore implements BlobStore {
  readonly #redis: Redis;
  readonly #options: RedisBlobStoreOptions;
  readonly #chunkBytes: number;

  constructor(redis: Redis, options: RedisBlobStoreOptions) {
    this.#redis = redis;
    this.#options = options;
    this.#chunkBytes = options.chunkBytes ?? DEFAULT_CHUNK_BYTES;
  }

  async put(key: string, data: Buffer): Promise<void> {
    const redisKey = this.#options.redisKey(key);
    const previous = await this.#redis.getBuffer(redisKey);
    const { value } = await this.encode(key, data);
    await this.#redis.set(redisKey, value);
    // The old chunks, if the key held a chunked blob before: unreachable from now on.
    if (previous !== null) await this.#dropParts(key, previous);
  }

  /**
   * The Redis key and value that store `data` under `key`, writing the chunks (or the spilled file)
   * first, for a caller that sets the value together with other commands in one MULTI or script.
   * A caller that then does not set the value must call `discard` with it.
   */
  async encode(key: string, data: Buffer): Promise<{ redisKey: string; value: Buffer }> {
    const redisKey = this.#options.redisKey(key);
    if (data.length <= this.#options.maxInlineBytes) return { redisKey, value: Buffer.concat([Buffer.of(INLINE), data]) };
    const large = this.#options.large ?? 'chunks';
    if (large !== 'chunks') {
      await large.put(key, data);
      return { redisKey, value: Buffer.concat([Buffer.of(SPILLED), Buffer.from(key)]) };
    }
    const manifest: ChunkManifest = { id: randomBytes(6).toString('hex'), chunks: Math.ceil(data.length / this.#chunkBytes), bytes: data.length };
    // A pipeline, not a MULTI: the chunks are invisible until the manifest names them, and separate
    // commands let other clients' commands run between them.
    const pipeline = this.#redis.pipeline();
    for (let i = 0; i < manifest.chunks; i++) pipeline.set(chunkKey(redisKey, manifest.id, i), data.subarray(i * this.#chunkBytes, (i + 1) * this.#chunkBytes));
    const results = (await pipeline.exec()) ?? [];
    const failed = results.find(([error]) => error !== null);
    if (failed?.[0]) {
      await this.#dropParts(key, manifestValue(manifest));
      throw redisWriteError(key, failed[0]);
    }
    return { redisKey, value: manifestValue(manifest) };
  }

  /** Undo an `encode` whose value was never stored (its chunks or spilled file). */
  async discard(key: string, value: Buffer): Promise<void> {
    await this.#dropParts(key, value);
  }

  async get(key: string): Promise<Buffer | undefined> {
    const redisKey = this.#options.redisKey(key);
    return this.#decode(key, redisKey, await this.#redis.getBuffer(redisKey));
  }

  /** One MGET: the keys must share a hash slot on a cluster (the transport's keys of one run do). */
  async getMany(keys: readonly string[]): Promise<Array<Buffer | undefined>> {
    if (keys.length === 0) return [];
    const redisKeys = keys.map((key) => this.#options.redisKey(key));
    const values = await this.#redis.mgetBuffer(...redisKeys);
    return Promise.all(keys.map((key, i) => this.#decode(key, redisKeys[i] as string, values[i] ?? null)));
  }

  async #decode(key: string, redisKey: string, value: Buffer | null, retried = false): Promise<Buffer | undefined> {
    if (value === null || value.length === 0) return undefined;
    if (value[0] === INLINE) return value.subarray(1);
    if (value[0] === SPILLED) {
      const large = this.#options.large;
      if (large === undefined || large === 'chunks') throw new AppError(ErrorCode.INTERNAL, `blob ${key} was spilled to a directory, and this process has no SQLENV_SPILL_DIR (SQLENV_BLOB_STORE=dir)`);
      return large.get(value.subarray(1).toString());
    }
    if (value[0] !== CHUNKED) throw new AppError(ErrorCode.INTERNAL, `blob ${key}: unreadable value (tag ${value[0]})`);
    const manifest = parseManifest(key, value);
    const chunks = await this.#redis.mgetBuffer(...Array.from({ length: manifest.chunks }, (_, i) => chunkKey(redisKey, manifest.id, i)));
    if (chunks.some((c) => c === null)) {
      // Rewritten or deleted while we read: the manifest we hold is gone with its chunks.
      if (retried) return undefined;
      return this.#decode(key, redisKey, await this.#redis.getBuffer(redisKey), true);
    }
    const data = Buffer.concat(chunks as Buffer[]);
    if (data.length !== manifest.bytes) throw new AppError(ErrorCode.INTERNAL, `blob ${key}: chunks hold ${data.length} bytes, manifest says ${manifest.bytes}`);
    return data;
  }

  async delete(key: string): Promise<void> {
    await this.deleteMany([key]);
  }

  async deleteMany(keys: readonly string[]): Promise<void> {
    if (keys.length === 0) return;
    const redisKeys = keys.map((key) => this.#options.redisKey(key));
    const values = await this.#redis.mgetBuffer(...redisKeys);
    await this.#redis.del(...redisKeys);
    await Promise.all(keys.map((key, i) => (values[i] ? this.#dropParts(key, values[i]) : undefined)));
  }

  /** Delete what a value points to: its chunks, or its spilled file. */
  async #dropParts(key: string, value: Buffer): Promise<void> {
    if (value[0] === CHUNKED) {
      const manifest = parseManifest(key, value);
      const redisKey = this.#options.redisKey(key);
      const chunkKeys = Array.from({ length: manifest.chunks }, (_, i) => chunkKey(redisKey, manifest.id, i));
      // In slices: one DEL of thousands of keys would hold Redis for a while.
      for (let i = 0; i < chunkKeys.length; i += 256) await this.#redis.del(...chunkKeys.slice(i, i + 256));
    } else if (value[0] === SPILLED) {
      const large = this.#options.large;
      if (large !== undefined && large !== 'chunks') await large.delete(value.subarray(1).toString());
    }
  }
}

function chunkKey(redisKey: string, id: string, index: number): string {
  return `${redisKey}#${id}:${index}`;
}

function manifestValue(manifest: ChunkManifest): Buffer {
  return Buffer.concat([Buffer.of(CHUNKED), Buffer.from(JSON.stringify(manifest))]);
}

function parseManifest(key: string, value: Buffer): ChunkManifest {
  const parsed = JSON.parse(value.subarray(1).toString('utf8')) as Partial<ChunkManifest>;
  if (typeof parsed.id !== 'string' || !Number.isInteger(parsed.chunks) || !Number.isInteger(parsed.bytes)) throw new AppError(ErrorCode.INTERNAL, `blob ${key}: malformed chunk manifest`);
  return parsed as ChunkManifest;
}

/**
 * A write Redis refused. Under `maxmemory-policy noeviction` a full Redis answers every write with
 * OOM: the caller gets CAPACITY with what to do, and nothing was half-written (chunks are cleaned up,
 * the manifest was never set).
 */
export function redisWriteError(what: string, error: Error): AppError {
  if (/^OOM\b/.test(error.message)) {
    return new AppError(ErrorCode.CAPACITY, `Redis is full and refuses writes (maxmemory reached, noeviction) while storing ${what}: raise maxmemory, or let retention free space (docs/operations.md, "Redis")`, { cause: error });
  }
  return new AppError(ErrorCode.TRANSPORT, `storing ${what}: ${error.message}`, { cause: error });
}
