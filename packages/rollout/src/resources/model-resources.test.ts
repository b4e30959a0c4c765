import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { modelFingerprint, presetConfig, writeRandomCheckpoint } from '@sqlenv/model';
import { RunModelSpecSchema, type RunModelSpec } from '@sqlenv/protocol';
import { AppError, ErrorCode, memoryLimitFrom, type MemoryLimit } from '@sqlenv/shared';
import { createModelResources } from './model-resources.ts';

const root = mkdtempSync(join(tmpdir(), 'sqlenv-model-resources-'));
const modelDir = join(root, 'tiny');
let spec: RunModelSpec;

/** A 64 GB host in a container whose cgroup v2 memory.max is `bytes`. */
function containerLimit(bytes: number): MemoryLimit {
  return memoryLimitFrom({ hostBytes: 64e9, procSelfCgroup: '0::/\n', readFile: (path) => (path === '/sys/fs/cgroup/memory.max' ? `${bytes}\n` : undefined) });
}

beforeAll(() => {
  writeRandomCheckpoint(modelDir, presetConfig('tiny-qwen3'), { seed: 2 });
  spec = RunModelSpecSchema.parse({ fingerprint: modelFingerprint(modelDir), max_new_tokens: 64, context_tokens: 2048 });
}, 60_000);
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('createModelResources under a memory limit', () => {
  it('serves concurrency 256 by queueing: the engine batches only the turns whose KV fits the limit', async () => {
    const resources = await createModelResources(spec, modelDir, { maxBatchSize: 256, lora: null, memoryLimit: containerLimit(64e6) });
    try {
      expect(resources.maxBatchSize).toBeGreaterThanOrEqual(1);
      expect(resources.maxBatchSize).toBeLessThan(256);
    } finally {
      await resources.close();
    }
    const roomy = await createModelResources(spec, modelDir, { maxBatchSize: 256, lora: null, memoryLimit: containerLimit(64e9) });
    try {
      expect(roomy.maxBatchSize).toBe(256);
    } finally {
      await roomy.close();
    }
  }, 120_000);

  it('refuses, before the engine starts, a model that cannot fit the limit, with the estimate and the limit', async () => {
    const error = await createModelResources(spec, modelDir, { maxBatchSize: 8, lora: null, memoryLimit: containerLimit(1e6) }).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe(ErrorCode.VALIDATION);
    expect((error as Error).message).toMatch(new RegExp(`^${join(modelDir, 'config.json')}: needs at least [\\d.]+ MB of memory, more than the cgroup v2 memory\\.max limit \\(/sys/fs/cgroup/memory\\.max\\), 1\\.00 MB: weights`));
  }, 60_000);
});
