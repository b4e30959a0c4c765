import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { initLoraWeights, parseLoraConfig, presetConfig, saveAdapterDir } from '@sqlenv/model';
import { modelSpecFrom, ModelSpecOptionsSchema } from './model-options.ts';

const root = mkdtempSync(join(tmpdir(), 'model-options-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('modelSpecFrom with an initial adapter (--adapter DIR)', () => {
  const config = presetConfig('tiny-qwen3');
  const lora = parseLoraConfig({ rank: 4, alpha: 8, targets: ['q_proj', 'v_proj'] });
  const dir = join(root, 'adapter');
  saveAdapterDir(dir, config, { lora, weights: initLoraWeights(config, lora, { seed: 1 }) });

  it("takes the run's LoRA shape from the adapter's adapter_config.json, so --adapter alone is enough", () => {
    const spec = modelSpecFrom({ adapter: dir }, 'sha256:x');
    expect(spec.adapter).toBe(dir);
    expect(spec.lora).toEqual({ rank: 4, alpha: 8, targets: ['q_proj', 'v_proj'] });
    // Flags that agree with the adapter are fine, in any target order.
    expect(modelSpecFrom({ adapter: dir, loraRank: 4, loraAlpha: 8, loraTargets: 'v_proj,q_proj' }, 'sha256:x').lora.rank).toBe(4);
  });

  it('refuses LoRA flags that contradict the adapter, and a directory that is not an adapter', () => {
    expect(() => modelSpecFrom({ adapter: dir, loraRank: 8 }, 'sha256:x')).toThrow(/r=4 lora_alpha=8 on q_proj,v_proj; --lora-rank/);
    expect(() => modelSpecFrom({ adapter: dir, loraTargets: 'q_proj' }, 'sha256:x')).toThrow(/must match it/);
    expect(() => modelSpecFrom({ adapter: join(root, 'none') }, 'sha256:x')).toThrow(/no adapter_config\.json/);
    const broken = join(root, 'broken');
    saveAdapterDir(broken, config, { lora, weights: initLoraWeights(config, lora) });
    writeFileSync(join(broken, 'adapter_config.json'), '{"r": 4}');
    expect(() => modelSpecFrom({ adapter: broken }, 'sha256:x')).toThrow(/lacks r, lora_alpha or a target_modules list/);
  });

  it('without an adapter the flags and defaults give the shape', () => {
    expect(modelSpecFrom({}, 'sha256:x').lora.rank).toBe(8);
    expect(modelSpecFrom({ loraRank: 2, loraTargets: 'k_proj' }, 'sha256:x').lora).toEqual({ rank: 2, alpha: 16, targets: ['k_proj'] });
  });
});

describe('modelSpecFrom learner settings (--lr, --loss, --kl-beta, --tis-cap, --micro-batch-tokens, --learner)', () => {
  it('writes the validated settings into the spec, the flags over the JSON', () => {
    const spec = modelSpecFrom({ learningRate: 2e-5, lossNormalisation: 'dr_grpo', learner: '{"optimizer":{"learningRate":1,"warmupSteps":3},"loss":{"epsHigh":0.3}}' }, 'sha256:x');
    expect(spec.learner).toMatchObject({ optimizer: { learningRate: 2e-5, warmupSteps: 3 }, loss: { normalisation: 'dr_grpo', epsHigh: 0.3, epsLow: 0.2 } });
  });

  it('--tis-cap sets loss.importanceCap over the JSON; 0 (no importance weight) is a value, Infinity and negatives are refused', () => {
    expect(modelSpecFrom({}, 'sha256:x').learner).toMatchObject({ loss: { importanceCap: 2 } });
    expect(modelSpecFrom({ tisCap: 5, learner: '{"loss":{"importanceCap":3}}' }, 'sha256:x').learner).toMatchObject({ loss: { importanceCap: 5 } });
    expect(modelSpecFrom(ModelSpecOptionsSchema.parse({ tisCap: '0' }), 'sha256:x').learner).toMatchObject({ loss: { importanceCap: 0 } });
    expect(ModelSpecOptionsSchema.safeParse({ tisCap: 'Infinity' }).success).toBe(false);
    expect(ModelSpecOptionsSchema.safeParse({ tisCap: '-1' }).success).toBe(false);
  });

  it('refuses bad settings before the run starts, naming what is wrong', () => {
    expect(() => modelSpecFrom({ learner: '{not json' }, 'sha256:x')).toThrow(/--learner must be a JSON object/);
    expect(() => modelSpecFrom({ learner: '[1, 2]' }, 'sha256:x')).toThrow(/--learner must be a JSON object/);
    expect(() => modelSpecFrom({ lossNormalisation: 'mean' }, 'sha256:x')).toThrow(/invalid learner config: .*normalisation/);
    expect(() => modelSpecFrom({ learner: '{"optimizer":{"schedule":"cosine"}}' }, 'sha256:x')).toThrow(/cosine needs optimizer.totalSteps/);
    expect(() => modelSpecFrom({ learner: '{"optimiser":{}}' }, 'sha256:x')).toThrow(/invalid learner config/);
  });
});
