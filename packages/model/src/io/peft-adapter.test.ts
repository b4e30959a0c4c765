import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { initLoraWeights, loraTensorSpecs, parseLoraConfig } from '../graphs/lora.ts';
import { ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE, decodeAdapter, encodeAdapter, loadAdapterDir, loraConfigFromPeft, saveAdapterDir } from './peft-adapter.ts';
import { presetConfig } from './presets.ts';
import { randomWeights } from './random-checkpoint.ts';
import { LogitsModel } from '../runtime/scorer.ts';
import { decodeSafetensors } from './safetensors.ts';

const config = presetConfig('tiny-qwen3');
const lora = parseLoraConfig({ rank: 4, alpha: 8, targets: ['q_proj', 'v_proj', 'down_proj'] });
const weights = initLoraWeights(config, lora, { seed: 3, bStd: 0.05 });
const dirs: string[] = [];
const tempDir = (): string => {
  const dir = mkdtempSync(join(tmpdir(), 'peft-adapter-'));
  dirs.push(dir);
  return dir;
};
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('PEFT adapter files', () => {
  it('save → load gives the same tensors; the files carry PEFT names and config keys', () => {
    const dir = tempDir();
    expect(saveAdapterDir(dir, config, { lora, weights }, { baseModel: 'tiny' })).toEqual([ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE]);
    const json = JSON.parse(readFileSync(join(dir, ADAPTER_CONFIG_FILE), 'utf8')) as Record<string, unknown>;
    expect(json).toMatchObject({ peft_type: 'LORA', r: 4, lora_alpha: 8, target_modules: ['q_proj', 'v_proj', 'down_proj'], task_type: 'CAUSAL_LM', bias: 'none' });
    const { tensors } = decodeSafetensors(readFileSync(join(dir, ADAPTER_WEIGHTS_FILE)));
    expect([...tensors.keys()].sort()).toEqual(loraTensorSpecs(config, lora).map((s) => s.name).sort());
    expect([...tensors.keys()]).toContain('base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight');
    const loaded = loadAdapterDir(dir, config);
    expect(loaded.lora).toEqual(lora);
    for (const [name, values] of weights) expect(loaded.weights.get(name)).toEqual(values);
  });

  it('save → load → identical logits: the loaded adapter drives the model exactly as the one saved', async () => {
    const dir = tempDir();
    saveAdapterDir(dir, config, { lora, weights });
    const loaded = loadAdapterDir(dir, config);
    const model = await LogitsModel.create(config, randomWeights(config, { seed: 4 }), { lora });
    try {
      const sequences = [[256, 72, 105, 33], [1, 2, 3, 4, 5, 6, 7]];
      const before = await model.logits(sequences, { lora: weights });
      const after = await model.logits(sequences, { lora: loaded.weights });
      const base = await model.logits(sequences);
      sequences.forEach((_, b) => {
        expect(after[b]).toEqual(before[b]);
        // The adapter is not a no-op, so equal logits say something.
        expect(Math.max(...Array.from(before[b]!, (x, i) => Math.abs(x - base[b]![i]!)))).toBeGreaterThan(1e-3);
      });
    } finally {
      await model.close();
    }
  });

  it('a blob describes itself: decodeAdapter reads the LoRA settings from the metadata', () => {
    const blob = encodeAdapter(config, { lora, weights }, { metadata: { policy_version: '3' } });
    const decoded = decodeAdapter(config, blob);
    expect(decoded.lora).toEqual(lora);
    expect(decoded.metadata['policy_version']).toBe('3');
    expect(decoded.weights.get(loraTensorSpecs(config, lora)[0]!.name)).toEqual(weights.get(loraTensorSpecs(config, lora)[0]!.name));
  });

  it('bf16 storage rounds to bf16 and loads back as float32', () => {
    const blob = encodeAdapter(config, { lora, weights }, { dtype: 'BF16' });
    const decoded = decodeAdapter(config, blob);
    const name = loraTensorSpecs(config, lora)[0]!.name;
    const a = weights.get(name)!;
    const b = decoded.weights.get(name)!;
    for (let i = 0; i < a.length; i++) expect(Math.abs(a[i]! - b[i]!)).toBeLessThanOrEqual(Math.abs(a[i]!) / 128);
  });

  it('refuses what it cannot apply exactly, naming it', () => {
    const base = { peft_type: 'LORA', r: 4, lora_alpha: 8, target_modules: ['q_proj'] };
    expect(() => loraConfigFromPeft({ ...base, use_dora: true })).toThrow(/use_dora/);
    expect(() => loraConfigFromPeft({ ...base, use_rslora: true })).toThrow(/use_rslora/);
    expect(() => loraConfigFromPeft({ ...base, rank_pattern: { q_proj: 8 } })).toThrow(/per-module ranks/);
    expect(() => loraConfigFromPeft({ ...base, target_modules: 'q_proj|v_proj' })).toThrow(/regular expression/);
    expect(() => loraConfigFromPeft({ ...base, target_modules: ['q_proj', 'lm_head'] })).toThrow(/lm_head/);
    expect(() => loraConfigFromPeft({ ...base, peft_type: 'IA3' })).toThrow(/peft_type/);
    expect(loraConfigFromPeft({ ...base, target_modules: ['v_proj', 'q_proj'] }).targets).toEqual(['q_proj', 'v_proj']);
  });

  it('a wrong or damaged directory is a clear error', () => {
    const dir = tempDir();
    expect(() => loadAdapterDir(dir, config)).toThrow(/adapter_config\.json is missing/);
    saveAdapterDir(dir, config, { lora, weights });
    const other = presetConfig('tiny-qwen3', { hiddenSize: 32, headDim: 8 });
    expect(() => loadAdapterDir(dir, other)).toThrow(/has shape/);
    writeFileSync(join(dir, ADAPTER_WEIGHTS_FILE), Buffer.from([1, 2, 3]));
    expect(() => loadAdapterDir(dir, config)).toThrow(/truncated/);
    const fewer = parseLoraConfig({ rank: 4, alpha: 8, targets: ['q_proj'] });
    expect(() => decodeAdapter(config, encodeAdapter(config, { lora, weights }), { lora: fewer })).toThrow(/do not use/);
  });
});
