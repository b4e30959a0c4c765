import { createSession, gradients, tensor, type TensorData } from '@sqlenv/onnx-graph';
import { describe, expect, it } from 'vitest';
import { leftPad, loraFeeds } from '../runtime/batch.ts';
import { buildScoringGraph, IO } from './forward-graphs.ts';
import { initLoraWeights, loraTensorName, loraTensorSpecs, parseLoraConfig } from './lora.ts';
import { presetConfig } from '../io/presets.ts';
import { randomWeights } from '../io/random-checkpoint.ts';

describe('scoring graph as the start of a training graph', () => {
  it('extends with a masked loss and gradients() w.r.t. the LoRA inputs that match finite differences', async () => {
    const config = presetConfig('tiny-qwen3', { numLayers: 1 });
    const weights = randomWeights(config, { seed: 2, initStd: 0.1 });
    const lora = parseLoraConfig({ rank: 2, alpha: 4, targets: ['q_proj', 'k_proj', 'down_proj'] });
    const scoring = buildScoringGraph(config, weights, { lora, vocabChunkSize: 100 });
    const g = scoring.graph;
    // loss = −Σ mask·logprob (the GRPO/SFT skeleton): a scalar the trainer will replace. The mask is
    // the attention mask itself: the graph already zeroes log-probs without a real predecessor.
    const lossMask = g.input('loss_mask', 'float32', ['B', 'T']);
    const loss = g.neg(g.reduceSum(g.mul(scoring.logprobs, lossMask)));
    const bName = loraTensorName(0, 'down_proj', 'B');
    const aName = loraTensorName(0, 'q_proj', 'A');
    const kName = loraTensorName(0, 'k_proj', 'B');
    const wrt = [bName, aName, kName].map((n) => scoring.params.loraInputs.get(n)).map((t) => {
      if (t === undefined) throw new Error('LoRA input missing');
      return t;
    });
    const [dB, dA, dK] = gradients(loss, wrt);
    g.output('loss', loss);
    g.output('d_b', dB!);
    g.output('d_a', dA!);
    g.output('d_k', dK!);
    const session = await createSession(g.toModel(), { mode: 'direct' });

    const sequences = [[256, 5, 9, 14, 2, 77], [256, 40, 41]];
    const batch = leftPad(sequences, config.padTokenId);
    const mask = Float32Array.from(batch.mask.data as BigInt64Array, (m) => Number(m));
    const adapter = initLoraWeights(config, lora, { seed: 4, bStd: 0.1 });
    const specs = loraTensorSpecs(config, lora);
    const run = async (values: typeof adapter): Promise<Record<string, TensorData>> =>
      session.run({
        [IO.inputIds]: batch.ids,
        [IO.attentionMask]: batch.mask,
        [IO.temperature]: tensor('float32', [], [1]),
        loss_mask: tensor('float32', [2, batch.width], mask),
        ...loraFeeds(specs, values),
      });
    const base = await run(adapter);
    const lossAt = async (name: string, index: number, delta: number): Promise<number> => {
      const shifted = new Map(adapter);
      const values = Float32Array.from(adapter.get(name) as Float32Array);
      values[index] = (values[index] as number) + delta;
      shifted.set(name, values);
      return ((await run(shifted))['loss']?.data as Float32Array)[0] as number;
    };
    for (const [name, grad] of [[bName, base['d_b']], [aName, base['d_a']], [kName, base['d_k']]] as const) {
      const g32 = grad?.data as Float32Array;
      // The three largest entries: central differences are reliable where the gradient is not tiny.
      const indices = Array.from(g32.keys()).sort((i, j) => Math.abs(g32[j]!) - Math.abs(g32[i]!)).slice(0, 3);
      for (const i of indices) {
        const eps = 1e-2;
        const numeric = ((await lossAt(name, i, eps)) - (await lossAt(name, i, -eps))) / (2 * eps);
        expect(Math.abs(numeric - g32[i]!)).toBeLessThanOrEqual(0.01 * Math.abs(g32[i]!) + 1e-3);
      }
    }
    await session.close();
  });
});
