import { parentPort, workerData } from 'node:worker_threads';
import { workerInput } from '../ts-worker.ts';

const input = workerInput<{ n: number }>(workerData);
parentPort?.postMessage({ n: input.n + 1 });
