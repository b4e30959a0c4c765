import { Worker, type WorkerOptions } from 'node:worker_threads';

/**
 * Start a worker thread from a TypeScript (or JavaScript) module.
 *
 * Why a bootstrap file: the project runs its TypeScript sources directly
 * (tsx), but Node 20 does not pass loader hooks registered with `--import tsx`
 * on to worker threads. The worker therefore starts from a plain `.mjs`
 * bootstrap that registers tsx inside the worker and then imports the entry.
 * The entry module receives its own data as `workerData.data`.
 */
export function startWorker(entry: URL, options: Omit<WorkerOptions, 'workerData'> & { data?: unknown } = {}): Worker {
  const { data, ...workerOptions } = options;
  const isTs = entry.pathname.endsWith('.ts');
  if (!isTs) return new Worker(entry, { ...workerOptions, workerData: { data } });
  const bootstrap = new URL('./worker-bootstrap.mjs', import.meta.url);
  return new Worker(bootstrap, { ...workerOptions, workerData: { entry: entry.href, data } });
}

/** Inside a worker started with `startWorker`: the data passed as `options.data`. */
export function workerInput<T>(workerData: unknown): T {
  return (workerData as { data: T }).data;
}
