import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { startApp, stopAll, waitFor, type AppProcess } from '@sqlenv/rollout/testing';

/**
 * The startup check of the model-running apps (docs/operations.md, "The GPU host"): a worker or
 * trainer logs the execution provider its sessions will use, and one asked for CUDA where CUDA
 * cannot run exits at once with the reason instead of quietly running on the CPU. This machine has
 * no GPU and the CPU build of ONNX Runtime.
 */
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const apps: AppProcess[] = [];

afterAll(async () => {
  await stopAll(apps);
});

describe('execution provider check at start', () => {
  it('a trainer asked for CUDA without it exits 1 naming what is missing; a CPU worker logs its provider', async () => {
    const trainer = startApp('trainer', 'cuda-trainer', ['--run', 'never-started'], { REDIS_URL, SQLENV_EXECUTION_PROVIDER: 'cuda' });
    const worker = startApp('worker', 'cpu-worker', ['--key-base', 'provider-check'], { REDIS_URL, SQLENV_EXECUTION_PROVIDER: 'cpu' });
    apps.push(trainer, worker);
    expect(await trainer.exited).toBe(1);
    expect(readFileSync(trainer.logFile, 'utf8')).toMatch(/RUNTIME: execution provider 'cuda' could not be loaded: .*CUDA 12 and cuDNN 9/);
    await waitFor(async () => Promise.resolve(/"executionProvider":"cpu"[^\n]*model sessions will run on this execution provider/.test(readFileSync(worker.logFile, 'utf8'))), 60_000, 'the worker logging its provider');
    worker.child.kill('SIGTERM');
    expect(await worker.exited).toBe(0);
  }, 90_000);
});
