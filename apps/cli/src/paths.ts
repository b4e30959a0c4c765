import path from 'node:path';
import { defaultCacheDir } from '@sqlenv/sql-env';

/**
 * Where generated data (the built-in dataset, gold-answer caches) lives:
 * SQLENV_CACHE_DIR when set, else the environment package's default (the
 * server and the rollout apps read the same variable, so all share one cache).
 */
export function cacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const configured = env['SQLENV_CACHE_DIR'];
  return configured ? path.resolve(configured) : defaultCacheDir();
}
