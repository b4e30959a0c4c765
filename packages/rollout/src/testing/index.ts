// Test helpers of @sqlenv/rollout, for its own tests and for tests/ and bench/ (`@sqlenv/rollout/testing`).
// Not part of the library: nothing in src/ outside testing/ imports them.
export { startApp, logTail, waitFor, stopAll, logDir, type AppProcess } from './app-processes.ts';
export { startPrivateRedis, freePort, type PrivateRedis } from './private-redis.ts';
export { deleteKeysUnder, scanKeys, stopAppsAndDeleteKeys } from './redis-keys.ts';
export { TOY_QUESTIONS, ToyPolicy, toyEnvironments } from './toy-environment.ts';
