import type { Redis } from 'ioredis';
import { redisGlobLiteral } from '../transport/run-keys.ts';

/** Delete every key under `<keyBase>:` (a test's or a bench's own prefix), scanning in pages. */
export async function deleteKeysUnder(redis: Redis, keyBase: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${redisGlobLiteral(keyBase)}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.del(...keys);
  } while (cursor !== '0');
}
