import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { AppError, ErrorCode } from '@sqlenv/shared';

/**
 * Bytes addressed by key: trajectories and weight blobs. Keys are
 * '/'-separated paths whose first segment is the run id
 * (`<run>/traj/<episode>/<attempt>`, `<run>/weights/...`).
 */
export interface BlobStore {
  put(key: string, data: Buffer): Promise<void>;
  get(key: string): Promise<Buffer | undefined>;
  /** Several blobs at once, in key order (one Redis round trip for the trainer's batch). */
  getMany(keys: readonly string[]): Promise<Array<Buffer | undefined>>;
  delete(key: string): Promise<void>;
  /** Delete several blobs (missing ones are fine). */
  deleteMany(keys: readonly string[]): Promise<void>;
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

  deleteMany(keys: readonly string[]): Promise<void> {
    for (const key of keys) this.#blobs.delete(key);
    return Promise.resolve();
  }

  get size(): number {
    return this.#blobs.size;
  }

  /** Keys under a prefix, sorted. */
  keys(prefix: string): string[] {
    return [...this.#blobs.keys()].filter((key) => key.startsWith(prefix)).sort();
  }
}

/**
 * Files under a directory shared by every process of a run (SQLENV_BLOB_STORE=dir: a shared volume;
 * an S3-compatible store would implement the same interface). Writes go to a temporary file and are
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

  async deleteMany(keys: readonly string[]): Promise<void> {
    await Promise.all(keys.map((key) => this.delete(key)));
  }

  /** Remove everything stored under a key prefix (a run's directory: `runs delete`). */
  async deletePrefix(prefix: string): Promise<void> {
    await rm(this.#path(prefix), { recursive: true, force: true });
  }
}

