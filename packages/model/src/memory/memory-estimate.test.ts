import { describe, expect, it } from 'vitest';
import { AppError, ErrorCode, memoryLimitFrom } from '@sqlenv/shared';
import { parseLoraConfig } from '../graphs/lora.ts';
import { checkModelFits, countParameters, estimateModelMemory, formatBytes } from './memory-estimate.ts';
import { presetConfig } from '../io/presets.ts';

describe('memory estimate', () => {
  const qwen3 = presetConfig('qwen3-0.6b');

  it('counts weights as float32 and a LoRA exactly (A [r, in] + B [out, r] per target per layer)', () => {
    const lora = parseLoraConfig({ rank: 16, alpha: 32, targets: ['q_proj', 'v_proj'] });
    const estimate = estimateModelMemory(qwen3, { lora });
    expect(estimate.weightsBytes).toBe(countParameters(qwen3) * 4);
    // q_proj [2048, 1024], v_proj [1024, 1024]: 16 × (1024 + 2048) + 16 × (1024 + 1024) per layer.
    expect(estimate.loraBytes).toBe(28 * (16 * 3072 + 16 * 2048) * 4);
    expect(estimate.totalBytes).toBe(estimate.weightsBytes + estimate.loraBytes);
  });

  it('refuses with the numbers what exceeds the bound, and passes what fits', () => {
    expect(() => checkModelFits(qwen3, 'config.json', { memoryBytes: 64e9 })).not.toThrow();
    let message = '';
    try {
      checkModelFits(qwen3, 'config.json', { memoryBytes: 1e9, batchSize: 8, contextTokens: 4096, lora: parseLoraConfig({ rank: 1024, alpha: 1024 }), trainedCopies: 3 });
    } catch (error) {
      expect(error).toBeInstanceOf(AppError);
      message = (error as Error).message;
    }
    expect(message).toMatch(/^config\.json: needs at least [\d.]+ GB of memory, more than the 1\.00 GB: weights 2\.38 GB \(5\.960e\+8 parameters: num_hidden_layers 28, /);
    expect(message).toContain('LoRA');
    expect(message).toContain('activations/KV');
  });

  it('checks against the container limit the reader finds, not the host memory, and says which (VALIDATION: exit 2)', () => {
    // A 64 GB host in a container limited to 2 GB by cgroup v2: 2.38 GB of float32 weights cannot load.
    const memoryLimit = memoryLimitFrom({ hostBytes: 64e9, procSelfCgroup: '0::/\n', readFile: (path) => (path === '/sys/fs/cgroup/memory.max' ? '2000000000\n' : undefined) });
    let error: unknown;
    try {
      checkModelFits(qwen3, 'config.json', { memoryLimit });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe(ErrorCode.VALIDATION);
    expect((error as Error).message).toMatch(/^config\.json: needs at least 2\.38 GB of memory, more than the cgroup v2 memory\.max limit \(\/sys\/fs\/cgroup\/memory\.max\), 2\.00 GB: weights/);
    const hostOnly = memoryLimitFrom({ hostBytes: 64e9, readFile: () => undefined });
    expect(() => checkModelFits(qwen3, 'config.json', { memoryLimit: hostOnly })).not.toThrow();
  });

  it('formats sizes in decimal units', () => {
    expect(formatBytes(512)).toBe('512 B');
    expect(formatBytes(2_380_000_000)).toBe('2.38 GB');
    expect(formatBytes(4.8e12)).toBe('4.80 TB');
  });
});
