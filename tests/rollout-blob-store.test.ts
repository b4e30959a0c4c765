import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { AppError, ErrorCode } from '@sqlenv/shared';
import { DirectoryBlobStore, RedisBlobStore } from '@sqlenv/rollout';
import { startPrivateRedis, scanKeys } from '@sqlenv/rollout/testing';

const dir = mkdtempSync(path.join(tmpdir(), 'sqlenv-blobs-'));
const redis = new Redis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379');
const prefix = `test-blob-${process.pid}-${Date.now()}`;
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

afterAll(async () => {
  const keys = await scanKeys(redis, `${prefix}:*`);
  if (keys.length > 0) await redis.del(...keys);
  await redis.quit();
  rmSync(dir, { recursive: true, force: true });
});

describe('RedisBlobStore with a spill directory (SQLENV_BLOB_STORE=dir)', () => {
  const spill = new DirectoryBlobStore(dir);
  const store = new RedisBlobStore(redis, { redisKey: (key) => `${prefix}:${key}`, maxInlineBytes: 64, large: spill });

  it('keeps small blobs in Redis and spills big ones to the directory', async () => {
    await store.put('run/traj/small', Buffer.from('x'.repeat(64)));
    await store.put('run/traj/big', Buffer.from('y'.repeat(65)));
    expect((await store.get('run/traj/small'))?.toString()).toBe('x'.repeat(64));
    expect((await store.get('run/traj/big'))?.toString()).toBe('y'.repeat(65));
    expect(await spill.get('run/traj/small')).toBeUndefined();
    expect((await spill.get('run/traj/big'))?.length).toBe(65);
    // Redis holds a pointer, not the payload.
    expect((await redis.strlen(`${prefix}:run/traj/big`)) < 65).toBe(true);
  });

  it('reads several blobs in one call, inline, spilled and missing, in key order', async () => {
    await store.put('run/traj/a', Buffer.from('a'));
    await store.put('run/traj/spilled', Buffer.from('z'.repeat(100)));
    const blobs = await store.getMany(['run/traj/spilled', 'run/traj/missing', 'run/traj/a']);
    expect(blobs.map((b) => b?.toString())).toEqual(['z'.repeat(100), undefined, 'a']);
    expect(await store.getMany([])).toEqual([]);
    await store.deleteMany(['run/traj/a', 'run/traj/spilled']);
  });

  it('deletes the spilled file with its pointer, and misses are undefined', async () => {
    await store.delete('run/traj/big');
    expect(await store.get('run/traj/big')).toBeUndefined();
    expect(readdirSync(path.join(dir, 'run', 'traj'))).toEqual([]);
    expect(await store.get('run/traj/none')).toBeUndefined();
  });

  it('rejects keys that would leave the directory', async () => {
    await expect(spill.put('run/../../etc', Buffer.from('x'))).rejects.toThrow(/bad blob key/);
  });
});

describe('RedisBlobStore with chunks in Redis (the default: no shared filesystem)', () => {
  const store = new RedisBlobStore(redis, { redisKey: (key) => `${prefix}:${key}`, maxInlineBytes: 64, chunkBytes: 100 });

  it('splits a big blob into chunks, reads it back whole, and a rewrite or delete leaves no chunk behind', async () => {
    const data = Buffer.from(Array.from({ length: 1050 }, (_, i) => i % 251));
    await store.put('run/weights/a', data);
    expect((await scanKeys(redis, `${prefix}:run/weights/a#*`)).length).toBe(11);
    expect((await store.get('run/weights/a'))?.equals(data)).toBe(true);
    const smaller = data.subarray(0, 250);
    await store.put('run/weights/a', smaller);
    expect((await scanKeys(redis, `${prefix}:run/weights/a#*`)).length).toBe(3);
    expect((await store.getMany(['run/weights/a']))[0]?.equals(smaller)).toBe(true);
    await store.delete('run/weights/a');
    expect(await scanKeys(redis, `${prefix}:run/weights/a*`)).toEqual([]);
  });

  it('carries an adapter-sized blob (40 MB) from one process to another through Redis alone', async () => {
    const bytes = 40 * 1024 * 1024;
    const writer = path.join(root, 'packages/rollout/src/testing/blob-writer.ts');
    const big = new RedisBlobStore(redis, { redisKey: (key) => `${prefix}:${key}`, maxInlineBytes: 256 * 1024 });
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', writer, process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379', prefix, 'run/weights/v1', String(bytes), '7'], { cwd: root, maxBuffer: 1 << 20 });
    const written = JSON.parse(stdout.trim()) as { sha256: string; bytes: number };
    const read = await big.get('run/weights/v1');
    expect(read?.length).toBe(bytes);
    expect(createHash('sha256').update(read ?? Buffer.alloc(0)).digest('hex')).toBe(written.sha256);
    // 40 one-MiB chunks: no single Redis command carries more than a chunk.
    const chunks = await scanKeys(redis, `${prefix}:run/weights/v1#*`);
    expect(chunks.length).toBe(40);
    for (const chunk of chunks.slice(0, 3)) expect(await redis.strlen(chunk)).toBeLessThanOrEqual(1024 * 1024);
    await big.delete('run/weights/v1');
    expect(await scanKeys(redis, `${prefix}:run/weights/v1*`)).toEqual([]);
  }, 120_000);

  it('under noeviction, a full Redis refuses the write with a clear error and nothing half-written is left', async () => {
    // A Redis of its own with a small maxmemory: the shared one is never filled.
    const full = await startPrivateRedis(['--maxmemory', '8mb', '--maxmemory-policy', 'noeviction']);
    const client = new Redis(full.url, { maxRetriesPerRequest: null });
    try {
      const small = new RedisBlobStore(client, { redisKey: (key) => `p:${key}`, maxInlineBytes: 64 * 1024, chunkBytes: 256 * 1024 });
      await small.put('run/weights/kept', Buffer.alloc(1024, 1));
      // 16 MB cannot fit under 8 MB: some chunk write is refused.
      const error = await small.put('run/weights/big', Buffer.alloc(16 * 1024 * 1024, 2)).then(() => undefined, (e: unknown) => e);
      expect(error).toBeInstanceOf(AppError);
      expect((error as AppError).code).toBe(ErrorCode.CAPACITY);
      expect((error as AppError).message).toMatch(/Redis is full and refuses writes \(maxmemory reached, noeviction\) while storing run\/weights\/big/);
      // Nothing of the refused blob is visible or left over; what was there is intact; writes work again.
      expect(await small.get('run/weights/big')).toBeUndefined();
      expect(await scanKeys(client, 'p:run/weights/big*')).toEqual([]);
      expect((await small.get('run/weights/kept'))?.equals(Buffer.alloc(1024, 1))).toBe(true);
      await small.put('run/weights/after', Buffer.alloc(1024 * 1024, 3));
      expect((await small.get('run/weights/after'))?.length).toBe(1024 * 1024);
    } finally {
      client.disconnect();
      await full.kill();
    }
  }, 60_000);
});
