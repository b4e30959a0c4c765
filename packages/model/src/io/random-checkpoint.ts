import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { toHfConfig, type ModelConfig } from './config.ts';
import { Xoshiro128 } from '@sqlenv/shared';
import { writeSafetensorsCheckpoint, numel, type StoredDtype, type TensorToWrite } from './safetensors.ts';
import { expectedTensorSpecs, type ModelWeights } from './weights.ts';

export interface RandomCheckpointOptions {
  /** PRNG seed; the same seed and config give the same bytes. Default 0. */
  seed?: number;
  /** Std of weights and biases (transformers' initializer_range is 0.02). Default 0.02. */
  initStd?: number;
  /** Std of the noise around 1 in RMSNorm scales, so tests exercise them. Default 0.1. */
  normStd?: number;
  /** Stored dtype. Default 'F32'. */
  dtype?: StoredDtype;
  /** Split into shards of at most this size (plus index). Default: one file. */
  maxShardSizeBytes?: number;
}

/**
 * Random float32 values for every tensor of a config, generated lazily in a
 * fixed order from one seed (each tensor from its own derived seed, so the
 * values do not depend on which tensors were materialised before).
 */
export function randomTensors(config: ModelConfig, options: RandomCheckpointOptions = {}): TensorToWrite[] {
  const seed = options.seed ?? 0;
  const initStd = options.initStd ?? 0.02;
  const normStd = options.normStd ?? 0.1;
  return expectedTensorSpecs(config).map((spec, index) => ({
    name: spec.name,
    shape: spec.shape,
    data: () => {
      const rng = new Xoshiro128(seed * 1_000_003 + index);
      return spec.kind === 'norm' ? rng.normalArray(numel(spec.shape), normStd, 1) : rng.normalArray(numel(spec.shape), initStd);
    },
  }));
}

/** Random weights in memory (tests): the same values `writeRandomCheckpoint` writes in F32. */
export function randomWeights(config: ModelConfig, options: RandomCheckpointOptions = {}): ModelWeights {
  const weights: ModelWeights = new Map();
  for (const t of randomTensors(config, options)) {
    weights.set(t.name, { shape: t.shape, data: typeof t.data === 'function' ? t.data() : t.data });
  }
  return weights;
}

/**
 * Write `config.json` and random safetensors for a config into `dir` (created
 * if needed), in the layout `from_pretrained` reads. Returns the files written.
 */
export function writeRandomCheckpoint(dir: string, config: ModelConfig, options: RandomCheckpointOptions = {}): string[] {
  mkdirSync(dir, { recursive: true });
  const hfConfig = { ...toHfConfig(config), torch_dtype: { F32: 'float32', F16: 'float16', BF16: 'bfloat16' }[options.dtype ?? 'F32'] };
  writeFileSync(join(dir, 'config.json'), `${JSON.stringify(hfConfig, null, 2)}\n`);
  const files = writeSafetensorsCheckpoint(dir, randomTensors(config, options), {
    dtype: options.dtype ?? 'F32',
    ...(options.maxShardSizeBytes === undefined ? {} : { maxShardSizeBytes: options.maxShardSizeBytes }),
  });
  return ['config.json', ...files];
}
