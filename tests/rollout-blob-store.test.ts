import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { DirectoryBlobStore, RedisBlobStore } from '@sqlenv/rollout';

const dir = mkdtempSync(path.join(tmpdir(), 'sqlenv-blobs-'));
const redis = new Redis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379');
const prefix = `test-blob-${process.pid}-${Date.now()}`;

afterAll(async () => {
  const keys = await redis.keys(`${prefix}:*`);
  if (keys.length > 0) await redis.del(...keys);
  await redis.quit();
  rmSync(dir, { recursive: true, force: true });
});

describe('RedisBlobStore', () => {
  const spill = new DirectoryBlobStore(dir);
  const store = new RedisBlobStore(redis, { redisKey: (key) => `${prefix}:${key}`, maxInlineBytes: 64, spill });

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
    await store.delete('run/traj/a');
    await store.delete('run/traj/spilled');
  });

  it('deletes the spilled file with its pointer, and misses are undefined', async () => {
    await store.delete('run/traj/big');
    expect(await store.get('run/traj/big')).toBeUndefined();
    expect(readdirSync(path.join(dir, 'run', 'traj'))).toEqual([]);
    expect(await store.get('run/traj/none')).toBeUndefined();
  });

  it('refuses a big blob when there is nowhere to spill it', async () => {
    const bounded = new RedisBlobStore(redis, { redisKey: (key) => `${prefix}:${key}`, maxInlineBytes: 4 });
    await expect(bounded.put('run/w', Buffer.from('12345'))).rejects.toThrow(/inline bound/);
  });

  it('rejects keys that would leave the directory', async () => {
    await expect(spill.put('run/../../etc', Buffer.from('x'))).rejects.toThrow(/bad blob key/);
  });
});
