import os from 'node:os';
import path from 'node:path';

/**
 * Where generated data (the built-in dataset, gold-answer caches) lives:
 * SQLENV_CACHE_DIR, else $XDG_CACHE_HOME/sqlenv, else ~/.cache/sqlenv.
 */
export function cacheDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env['SQLENV_CACHE_DIR']) return path.resolve(env['SQLENV_CACHE_DIR']);
  const base = env['XDG_CACHE_HOME'] ? env['XDG_CACHE_HOME'] : path.join(os.homedir(), '.cache');
  return path.join(base, 'sqlenv');
}
