import { describe, expect, it } from 'vitest';
import type { ModelConfig } from '../io/config.ts';
import { initLoraWeights, mergeLora, parseLoraConfig, zeroLoraWeights } from './lora.ts';
import { presetConfig, type PresetName } from '../io/presets.ts';
import { randomWeights } from '../io/random-checkpoint.ts';
import { referenceForward } from './reference-forward.ts';
import { LogitsModel, Scorer } from '../runtime/scorer.ts';

/** max |got − want| / max |want|: relative to the logits' scale, so near-zero entries do not dominate. */
function maxRelativeError(got: ArrayLike<number>, want: ArrayLike<number>): number {
  expect(got.length).toBe(want.length);
  let maxDiff = 0;
  let scale = 0;
  for (let i = 0; i < want.length; i++) {
    maxDiff = Math.max(maxDiff, Math.abs((got[i] as number) - (want[i] as number)));
    scale = Math.max(scale, Math.abs(want[i] as number));
  }
  return maxDiff / scale;
}

const flat = (rows: Float64Array[]): number[] => rows.flatMap((r) => Array.from(r));
const tokens = (config: ModelConfig, n: number, salt: number): number[] =>
  Array.from({ length: n }, (_, i) => (i * 37 + salt * 11 + 5) % config.vocabSize);

describe.each(['tiny-qwen2', 'tiny-qwen3', 'tiny-llama'] as PresetName[])('%s forward', (preset) => {
  const config = presetConfig(preset);
  const weights = randomWeights(config, { seed: 11, initStd: 0.1 });

  it('ONNX logits equal the plain-TypeScript reference (max relative error ≤ 1e-5)', async () => {
    const model = await LogitsModel.create(config, weights);
    const ids = tokens(config, 9, 1);
    const [got] = await model.logits([ids]);
    const error = maxRelativeError(got as Float32Array, flat(referenceForward(config, weights, ids)));
    expect(error).toBeLessThanOrEqual(1e-5);
    // The check is not vacuous: other weights give other logits.
    const other = flat(referenceForward(config, randomWeights(config, { seed: 12, initStd: 0.1 }), ids));
    expect(maxRelativeError(got as Float32Array, other)).toBeGreaterThan(1e-2);
    await model.close();
    // The low-memory layout (W·xᵀ with the weight read in place) computes the same function.
    const inPlace = await LogitsModel.create(config, weights, { inPlaceWeights: true });
    const [same] = await inPlace.logits([ids]);
    expect(maxRelativeError(same as Float32Array, flat(referenceForward(config, weights, ids)))).toBeLessThanOrEqual(1e-5);
    await inPlace.close();
  });

  it('LoRA inputs: zero adapter = base model, random adapter = reference with merged weights', async () => {
    const lora = parseLoraConfig({ rank: 4, alpha: 8 });
    const model = await LogitsModel.create(config, weights, { lora });
    const ids = tokens(config, 6, 2);
    const [zero] = await model.logits([ids], { lora: zeroLoraWeights(config, lora) });
    expect(maxRelativeError(zero as Float32Array, flat(referenceForward(config, weights, ids)))).toBeLessThanOrEqual(1e-5);
    const adapter = initLoraWeights(config, lora, { seed: 3, bStd: 0.05 });
    const [adapted] = await model.logits([ids], { lora: adapter });
    const merged = flat(referenceForward(config, mergeLora(config, weights, lora, adapter), ids));
    expect(maxRelativeError(adapted as Float32Array, merged)).toBeLessThanOrEqual(1e-5);
    expect(maxRelativeError(adapted as Float32Array, zero as Float32Array)).toBeGreaterThan(1e-3);
    await model.close();
  });
});

describe('scoring graph', () => {
  const config = presetConfig('tiny-qwen3');
  const weights = randomWeights(config, { seed: 5, initStd: 0.1 });

  it('chunked log-probs equal log-softmax of the full logits, batched with left padding', async () => {
    const logitsModel = await LogitsModel.create(config, weights);
    // 100-column chunks over a 272-word vocabulary: three chunks, the last one partial.
    const scorer = await Scorer.create(config, weights, { vocabChunkSize: 100 });
    const sequences = [tokens(config, 7, 3), tokens(config, 3, 4), tokens(config, 5, 5)];
    for (const temperature of [1, 0.6]) {
      const scored = await scorer.score(sequences, { temperature });
      for (const [i, seq] of sequences.entries()) {
        const [logits] = await logitsModel.logits([seq]);
        const V = config.vocabSize;
        const want = seq.map((id, t) => {
          if (t === 0) return 0;
          const row = Array.from((logits as Float32Array).subarray((t - 1) * V, t * V), (x) => x / temperature);
          const max = Math.max(...row);
          return row[id]! - max - Math.log(row.reduce((s, x) => s + Math.exp(x - max), 0));
        });
        expect(scored[i]).toHaveLength(seq.length);
        scored[i]!.forEach((lp, t) => expect(Math.abs(lp - want[t]!)).toBeLessThanOrEqual(1e-5));
      }
    }
    await logitsModel.close();
    await scorer.close();
  });
});
