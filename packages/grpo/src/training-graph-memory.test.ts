import { createSession, tensor, type TensorData } from '@sqlenv/onnx-graph';
import { fileURLToPath } from 'node:url';
import { IO, initLoraWeights, readModelConfig, leftPad, loraTensorSpecs, parseLoraConfig, presetConfig, randomWeights, LORA_TARGETS } from '@sqlenv/model';
import { describe, expect, it } from 'vitest';
import { parseLearnerConfig, PolicyLossConfigSchema } from './config.ts';
import { buildTrainingGraph, keptActivationBytes, RECOMPUTE_ABOVE_BYTES, resolveRecompute, TRAIN_IO, type TrainingGraphOptions } from './training-graph.ts';

/**
 * The memory plan changes how the gradients are computed, never what they are: the analytic log-prob
 * head and recomputed attention or layers give the plain autodiff's loss and gradients (float64).
 * The finite-difference check itself is in training-graph.test.ts (default settings).
 */
const config = presetConfig('tiny-qwen3', { numLayers: 2 });
const weights = randomWeights(config, { seed: 21, initStd: 0.08 });
const lora = parseLoraConfig({ rank: 2, alpha: 4, targets: [...LORA_TARGETS] });
const specs = loraTensorSpecs(config, lora);
const adapter = initLoraWeights(config, lora, { seed: 4, bStd: 0.2 });
const rows = [
  [256, 40, 41, 42, 43, 44, 45],
  [256, 50, 51, 52],
];

async function lossAndGradients(options: Pick<TrainingGraphOptions, 'logprobGradient' | 'recompute'>): Promise<number[][]> {
  const built = buildTrainingGraph(config, weights, { lora, objective: 'policy', loss: PolicyLossConfigSchema.parse({ klBeta: 0 }), dtype: 'float64', vocabChunkSize: 100, ...options });
  const session = await createSession(built.graph.toModel(), { mode: 'direct' });
  try {
    const batch = leftPad(rows, config.padTokenId);
    const W = batch.width;
    const perToken = (f: (b: number, t: number) => number): TensorData => tensor('float64', [rows.length, W], Float64Array.from({ length: rows.length * W }, (_, k) => f(Math.floor(k / W), k % W)));
    const out = await session.run({
      [IO.inputIds]: batch.ids,
      [IO.attentionMask]: batch.mask,
      [IO.temperature]: tensor('float64', [], [0.8]),
      [TRAIN_IO.tokenWeights]: perToken((b, t) => (t - (batch.padLengths[b] as number) >= 2 ? 0.1 : 0)),
      [TRAIN_IO.advantages]: perToken((b) => (b === 0 ? 1.1 : -0.6)),
      [TRAIN_IO.behaviourLogprobs]: perToken(() => -5.5),
      [TRAIN_IO.proxLogprobs]: perToken(() => 0),
      [TRAIN_IO.proxFromCurrent]: tensor('bool', [], [true]),
      ...Object.fromEntries(specs.map((s) => [s.name, tensor('float64', s.shape, Float64Array.from(adapter.get(s.name) as Float32Array))])),
    });
    return [[...(out[TRAIN_IO.loss]?.data as Float64Array)], ...specs.map((s) => [...(out[TRAIN_IO.gradient(s.name)]?.data as Float64Array)])];
  } finally {
    await session.close();
  }
}

describe('training graph memory settings', () => {
  it('the analytic head and recomputed attention or layers give the autodiff loss and gradients', async () => {
    const plain = await lossAndGradients({ logprobGradient: 'autodiff', recompute: 'none' });
    expect(Math.max(...plain.slice(1).flat().map(Math.abs))).toBeGreaterThan(1e-3);
    for (const options of [
      { logprobGradient: 'analytic', recompute: 'none' },
      { logprobGradient: 'analytic', recompute: 'attention' },
      { logprobGradient: 'analytic', recompute: 'layer' },
      { logprobGradient: 'autodiff', recompute: 'layer' },
    ] as const) {
      const other = await lossAndGradients(options);
      plain.forEach((values, i) => values.forEach((v, k) => expect(Math.abs((other[i]?.[k] ?? NaN) - v), `${JSON.stringify(options)} tensor ${i}`).toBeLessThanOrEqual(1e-10 * Math.max(1, Math.abs(v)))));
    }
  });
});

describe("recompute: 'auto'", () => {
  const shipped = readModelConfig(fileURLToPath(new URL('../../../models/sqlenv-base', import.meta.url)));
  it('keeps every activation of the shipped 2.1 M-parameter model and recomputes layers of the 0.5–0.6 B ones', () => {
    expect(keptActivationBytes(shipped, 4096)).toBeLessThan(RECOMPUTE_ABOVE_BYTES);
    expect(resolveRecompute(shipped, 4096, 'auto')).toBe('none');
    for (const preset of ['qwen3-0.6b', 'qwen2.5-0.5b', 'smollm2-135m']) {
      expect(keptActivationBytes(presetConfig(preset), 4096), preset).toBeGreaterThan(RECOMPUTE_ABOVE_BYTES);
      expect(resolveRecompute(presetConfig(preset), 4096, 'auto'), preset).toBe('layer');
    }
    // Smaller micro-batches fit more models without recomputation; an explicit setting always wins.
    expect(resolveRecompute(presetConfig('smollm2-135m'), 256, 'auto')).toBe('none');
    expect(resolveRecompute(shipped, 4096, 'layer')).toBe('layer');
    expect(resolveRecompute(presetConfig('qwen3-0.6b'), 4096, 'none')).toBe('none');
  });

  it('is the learner default, and an unknown setting is refused by name', () => {
    expect(parseLearnerConfig({}).recompute).toBe('auto');
    expect(() => parseLearnerConfig({ recompute: 'sometimes' })).toThrow(/invalid learner config: .*recompute/);
  });
});
