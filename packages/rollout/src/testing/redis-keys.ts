import type { Redis } from 'ioredis';
import { redisGlobLiteral } from '../transport/run-keys.ts';
import { stopAll, type AppProcess } from './app-processes.ts';

/** Every key matching `pattern`, sorted (scanning in pages: the shared Redis holds other keys too). */
export async function scanKeys(redis: Redis, pattern: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    found.push(...keys);
  } while (cursor !== '0');
  return found.sort();
}

/** Delete every key under `<keyBase>:` (a test's or a bench's own prefix), scanning in pages. */
export async function deleteKeysUnder(redis: Redis, keyBase: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${redisGlobLiteral(keyBase)}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.del(...keys);
  } while (cursor !== '0');
}

/** The end of a test file that started apps on Redis: stop them, delete the keys under `keyBase`, disconnect. */
export async function stopAppsAndDeleteKeys(apps: readonly AppProcess[], redis: Redis, keyBase: string): Promise<void> {
  await stopAll(apps);
  await deleteKeysUnder(redis, keyBase);
  await redis.quit();
}
