// Plain-JS entry for worker threads that run TypeScript modules (see ts-worker.ts).
import { workerData } from 'node:worker_threads';
import { register } from 'tsx/esm/api';

register();
await import(workerData.entry);
