import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import { RedisBlobStore } from '../store/redis-blob-store.ts';

/**
 * Child process of the blob-store test: writes one blob of N pseudo-random bytes through its own
 * RedisBlobStore (as a trainer on another host would) and prints its SHA-256 as one JSON line.
 * Usage: node --import tsx blob-writer.ts <redis url> <key prefix> <blob key> <bytes> <seed>
 */
const [url, prefix, key, bytesText, seedText] = process.argv.slice(2);
if (!url || !prefix || !key || !bytesText || !seedText) throw new Error('usage: blob-writer <redis url> <key prefix> <blob key> <bytes> <seed>');
const data = Buffer.alloc(Number(bytesText));
// xorshift32: incompressible-looking bytes, the same for a seed in any process.
let x = Number(seedText) >>> 0 || 1;
for (let i = 0; i < data.length; i += 4) {
  x ^= x << 13;
  x ^= x >>> 17;
  x ^= x << 5;
  data.writeUInt32LE(x >>> 0, i);
}
const redis = new Redis(url, { maxRetriesPerRequest: null });
const store = new RedisBlobStore(redis, { redisKey: (k) => `${prefix}:${k}`, maxInlineBytes: 256 * 1024 });
const started = performance.now();
await store.put(key, data);
process.stdout.write(`${JSON.stringify({ sha256: createHash('sha256').update(data).digest('hex'), bytes: data.length, writeMs: Math.round(performance.now() - started) })}\n`);
await redis.quit();
