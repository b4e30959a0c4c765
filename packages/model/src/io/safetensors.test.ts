import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { bf16BitsToF32, f16BitsToF32, f32ToBf16Bits, f32ToF16Bits } from './half-float.ts';
import { presetConfig } from './presets.ts';
import { randomWeights, writeRandomCheckpoint } from './random-checkpoint.ts';
import { readSafetensorsHeader, SafetensorsCheckpoint, writeSafetensorsFile } from './safetensors.ts';
import { expectedTensorSpecs, loadModel } from './weights.ts';
import { parseHfConfig, toHfConfig } from './config.ts';
import { appErrorOf } from '@sqlenv/shared/testing';

const root = mkdtempSync(join(tmpdir(), 'sqlenv-safetensors-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('half floats', () => {
  it('bf16 and f16 conversions round to nearest even and keep special values', () => {
    expect(f32ToBf16Bits(1)).toBe(0x3f80);
    expect(bf16BitsToF32(0x3f80)).toBe(1);
    // 1 + 2^-8 lies exactly between two bf16 values (1 and 1 + 2^-7): ties go to the even mantissa (1).
    expect(bf16BitsToF32(f32ToBf16Bits(1 + 2 ** -8))).toBe(1);
    expect(bf16BitsToF32(f32ToBf16Bits(1 + 3 * 2 ** -8))).toBe(1 + 2 ** -6);
    expect(f32ToF16Bits(1)).toBe(0x3c00);
    expect(f32ToF16Bits(65504)).toBe(0x7bff);
    expect(f32ToF16Bits(1e6)).toBe(0x7c00);
    expect(f16BitsToF32(f32ToF16Bits(2 ** -24))).toBe(2 ** -24); // smallest subnormal
    expect(f16BitsToF32(f32ToF16Bits(-0.333251953125))).toBe(-0.333251953125);
    expect(Number.isNaN(bf16BitsToF32(f32ToBf16Bits(NaN)))).toBe(true);
    expect(Number.isNaN(f16BitsToF32(f32ToF16Bits(NaN)))).toBe(true);
  });
});

describe('safetensors', () => {
  it('writes the reference layout: u64 header length, 8-byte aligned JSON header, raw data', () => {
    const file = join(root, 'one.safetensors');
    writeSafetensorsFile(file, [{ name: 'w', shape: [2, 2], data: Float32Array.from([1, 2, 3, 4]) }], 'F32');
    const bytes = readFileSync(file);
    const headerSize = Number(bytes.readBigUInt64LE(0));
    expect(headerSize % 8).toBe(0);
    const header = JSON.parse(bytes.subarray(8, 8 + headerSize).toString('utf8')) as Record<string, unknown>;
    expect(header['w']).toEqual({ dtype: 'F32', shape: [2, 2], data_offsets: [0, 16] });
    expect(Array.from(new Float32Array(bytes.buffer.slice(bytes.byteOffset + 8 + headerSize, bytes.byteOffset + 8 + headerSize + 16)))).toEqual([1, 2, 3, 4]);
  });

  it.each(['F32', 'F16', 'BF16'] as const)('round-trips a tiny checkpoint stored as %s', (dtype) => {
    const config = presetConfig('tiny-qwen3');
    const dir = join(root, `tiny-${dtype}`);
    writeRandomCheckpoint(dir, config, { seed: 7, dtype });
    const loaded = loadModel(dir);
    expect(loaded.config).toEqual(config);
    const expected = randomWeights(config, { seed: 7 });
    const tolerance = { F32: 0, F16: 2 ** -11, BF16: 2 ** -8 }[dtype];
    for (const spec of expectedTensorSpecs(config)) {
      const got = loaded.weights.get(spec.name)?.data as Float32Array;
      const want = expected.get(spec.name)?.data as Float32Array;
      expect(got.length).toBe(want.length);
      let worst = 0;
      for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs((got[i] as number) - (want[i] as number)) / Math.max(Math.abs(want[i] as number), 2 ** -14));
      expect(worst).toBeLessThanOrEqual(tolerance);
    }
    expect(readSafetensorsHeader(join(dir, 'model.safetensors')).tensors[0]?.dtype).toBe(dtype);
  });

  it('writes and reads sharded checkpoints through model.safetensors.index.json', () => {
    const config = presetConfig('tiny-llama');
    const dir = join(root, 'sharded');
    const files = writeRandomCheckpoint(dir, config, { seed: 3, dtype: 'BF16', maxShardSizeBytes: 40_000 });
    const shards = files.filter((f) => f.endsWith('.safetensors'));
    expect(shards.length).toBeGreaterThan(2);
    expect(shards[0]).toMatch(/^model-00001-of-000\d\d\.safetensors$/);
    const index = JSON.parse(readFileSync(join(dir, 'model.safetensors.index.json'), 'utf8')) as { weight_map: Record<string, string> };
    expect(Object.keys(index.weight_map).sort()).toEqual(expectedTensorSpecs(config).map((s) => s.name).sort());
    const checkpoint = SafetensorsCheckpoint.open(dir);
    expect(new Set(checkpoint.names().map((n) => checkpoint.info(n).file)).size).toBe(shards.length);
    const single = join(root, 'unsharded');
    writeRandomCheckpoint(single, config, { seed: 3, dtype: 'BF16' });
    const a = loadModel(dir).weights;
    const b = loadModel(single).weights;
    for (const [name, t] of b) expect(a.get(name)?.data).toEqual(t.data);
  });
});

describe('checkpoint validation', () => {
  const config = presetConfig('tiny-qwen2');
  const dir = join(root, 'qwen2');
  writeRandomCheckpoint(dir, config, { seed: 1 });

  it('names a missing tensor', () => {
    const broken = join(root, 'missing');
    writeRandomCheckpoint(broken, config, { seed: 1 });
    const specs = expectedTensorSpecs(config).filter((s) => s.name !== 'model.layers.1.self_attn.k_proj.bias');
    writeSafetensorsFile(join(broken, 'model.safetensors'), specs.map((s) => ({ ...s, data: new Float32Array(s.shape.reduce((x, y) => x * y, 1)) })), 'F32');
    const error = appErrorOf(() => loadModel(broken));
    expect(error.code).toBe('MODEL');
    expect(error.message).toContain('missing 1 tensor(s)');
    expect(error.message).toContain('model.layers.1.self_attn.k_proj.bias');
  });

  it('names a tensor with the wrong shape', () => {
    const broken = join(root, 'shape');
    writeRandomCheckpoint(broken, config, { seed: 1 });
    const specs = expectedTensorSpecs(config).map((s) => (s.name === 'model.norm.weight' ? { ...s, shape: [s.shape[0]! + 1] } : s));
    writeSafetensorsFile(join(broken, 'model.safetensors'), specs.map((s) => ({ ...s, data: new Float32Array(s.shape.reduce((x, y) => x * y, 1)) })), 'F32');
    const error = appErrorOf(() => loadModel(broken));
    expect(error.message).toBe(`tensor model.norm.weight has shape [${config.hiddenSize + 1}], expected [${config.hiddenSize}]`);
  });

  it('rejects unsupported architectures and features with a clear message', () => {
    const hf = toHfConfig(config);
    expect(appErrorOf(() => parseHfConfig({ ...hf, architectures: ['MistralForCausalLM'] })).message).toMatch(
      /^unsupported architecture "MistralForCausalLM": expected one of Qwen2ForCausalLM, Qwen3ForCausalLM, LlamaForCausalLM$/,
    );
    expect(appErrorOf(() => parseHfConfig({ ...hf, rope_scaling: { rope_type: 'llama3', factor: 8 } })).message).toContain('unsupported rope_scaling');
    expect(appErrorOf(() => parseHfConfig({ ...hf, num_key_value_heads: 3 })).message).toContain('numHeads must be a multiple of numKvHeads');
    expect(appErrorOf(() => parseHfConfig({ ...hf, hidden_size: 'big' })).message).toContain('hidden_size');
    const unsupported = join(root, 'mistral');
    writeRandomCheckpoint(unsupported, config, { seed: 1 });
    writeFileSync(join(unsupported, 'config.json'), JSON.stringify({ ...hf, architectures: ['MistralForCausalLM'] }));
    expect(appErrorOf(() => loadModel(unsupported)).code).toBe('MODEL');
    expect(appErrorOf(() => loadModel(join(root, 'nope'))).message).toContain('no config.json');
  });

  it('parses real published configs into the presets', () => {
    // Qwen3-0.6B's config.json (fields that matter), from the Hugging Face hub.
    const qwen3 = parseHfConfig({
      architectures: ['Qwen3ForCausalLM'], attention_bias: false, bos_token_id: 151643, eos_token_id: 151645, head_dim: 128,
      hidden_act: 'silu', hidden_size: 1024, intermediate_size: 3072, max_position_embeddings: 40960, model_type: 'qwen3',
      num_attention_heads: 16, num_hidden_layers: 28, num_key_value_heads: 8, rms_norm_eps: 1e-6, rope_scaling: null,
      rope_theta: 1000000, tie_word_embeddings: true, torch_dtype: 'bfloat16', vocab_size: 151936,
    });
    expect({ ...qwen3, eosTokenIds: [], padTokenId: 0 }).toEqual({ ...presetConfig('qwen3-0.6b'), eosTokenIds: [], padTokenId: 0 });
    expect(existsSync(join(dir, 'config.json'))).toBe(true);
  });
});
