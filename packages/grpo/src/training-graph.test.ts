import { createSession, tensor, type GraphSession, type TensorData } from '@sqlenv/onnx-graph';
import { initLoraWeights, leftPad, loraTensorSpecs, parseLoraConfig, presetConfig, randomWeights, IO, LORA_TARGETS } from '@sqlenv/model';
import { Xoshiro128 } from '@sqlenv/shared';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PolicyLossConfigSchema } from './config.ts';
import { buildTrainingGraph, TRAIN_IO } from './training-graph.ts';

/**
 * The whole-model gradient check: d(GRPO loss)/d(every LoRA tensor of every target module) from the
 * emitted backward graph against central finite differences, in float64 on a 2-layer tiny Qwen3, at
 * temperature 0.7, with a ragged (left-padded) batch, clipping active on both sides, truncated
 * importance weights and a k3 KL term.
 */
const config = presetConfig('tiny-qwen3', { numLayers: 2 });
const weights = randomWeights(config, { seed: 11, initStd: 0.08 });
const lora = parseLoraConfig({ rank: 2, alpha: 4, targets: [...LORA_TARGETS] });
const specs = loraTensorSpecs(config, lora);
const lossConfig = PolicyLossConfigSchema.parse({ epsLow: 0.2, epsHigh: 0.28, klBeta: 0.1, importanceCap: 1.5 });
const TEMPERATURE = 0.7;
const sequences = [
  [256, 40, 41, 42, 43, 44, 45],
  [256, 50, 51, 52],
  [256, 60, 61, 62, 63, 64, 65, 66, 67],
];
// Loss tokens: the "completion" part of each sequence (mask 1 from some index on).
const lossMasks: number[][] = sequences.map((s, i) => s.map((_, t) => (t >= [3, 1, 4][i]! ? 1 : 0)));
const advantages = [1.3, -0.7, 0.4];

type Adapter = Map<string, Float64Array>;

describe('training graph (float64, whole model)', () => {
  let session: GraphSession;
  let adapter: Adapter;
  let feedsFor: (rows: number[], values: Adapter, extra?: { prox?: number[][]; behaviour?: number[][]; ref?: number[][] }) => Record<string, TensorData>;
  let perturbed: { prox: number[][]; behaviour: number[][]; ref: number[][] };

  beforeAll(async () => {
    const built = buildTrainingGraph(config, weights, { lora, objective: 'policy', loss: lossConfig, dtype: 'float64', vocabChunkSize: 100 });
    expect(built.hasReference).toBe(true);
    session = await createSession(built.graph.toModel(), { mode: 'direct' });
    const init = initLoraWeights(config, lora, { seed: 3, bStd: 0.2 });
    adapter = new Map([...init].map(([k, v]) => [k, Float64Array.from(v)]));
    const totalLossTokens = lossMasks.flat().reduce((a, b) => a + b, 0);
    feedsFor = (rows, values, extra = {}) => {
      const batch = leftPad(rows.map((r) => sequences[r]!), config.padTokenId);
      const W = batch.width;
      const perToken = (fill: (row: number, t: number) => number): TensorData =>
        tensor('float64', [rows.length, W], Float64Array.from({ length: rows.length * W }, (_, k) => {
          const b = Math.floor(k / W);
          const t = k % W - batch.padLengths[b]!;
          return t < 0 ? 0 : fill(rows[b]!, t);
        }));
      const zero = (): number => 0;
      return {
        [IO.inputIds]: batch.ids,
        [IO.attentionMask]: batch.mask,
        [IO.temperature]: tensor('float64', [], [TEMPERATURE]),
        [TRAIN_IO.tokenWeights]: perToken((r, t) => lossMasks[r]![t]! / totalLossTokens),
        [TRAIN_IO.advantages]: perToken((r) => advantages[r]!),
        [TRAIN_IO.behaviourLogprobs]: perToken(extra.behaviour ? (r, t) => extra.behaviour![r]![t]! : zero),
        [TRAIN_IO.proxLogprobs]: perToken(extra.prox ? (r, t) => extra.prox![r]![t]! : zero),
        [TRAIN_IO.proxFromCurrent]: tensor('bool', [], [extra.prox === undefined]),
        [TRAIN_IO.refLogprobs]: perToken(extra.ref ? (r, t) => extra.ref![r]![t]! : zero),
        ...Object.fromEntries(specs.map((s) => [s.name, tensor('float64', s.shape, values.get(s.name)!)])),
      };
    };
    // Log-probs of the current adapter, then a proximal and a behaviour policy a little away from it
    // (so the ratio leaves the clip range on both sides and some importance weights hit the cap),
    // and a reference policy (adapter off).
    const all = [0, 1, 2];
    const current = await logprobsOf(session, feedsFor(all, adapter), all);
    const zeros = new Map([...adapter].map(([k, v]) => [k, new Float64Array(v.length)]));
    const ref = await logprobsOf(session, feedsFor(all, zeros), all);
    const rng = new Xoshiro128(5);
    const shift = (rows: number[][], scale: number): number[][] => rows.map((r) => r.map((v) => v + (rng.uniform() * 2 - 1) * scale));
    perturbed = { prox: shift(current, 0.5), behaviour: shift(current, 0.8), ref };
  });

  afterAll(async () => {
    await session?.close();
  });

  async function logprobsOf(s: GraphSession, feeds: Record<string, TensorData>, rows: number[]): Promise<number[][]> {
    const out = await s.run(feeds);
    const lp = out[TRAIN_IO.logprobs]!.data as Float64Array;
    const W = (out[TRAIN_IO.logprobs]!.dims[1] as number);
    return rows.map((r, b) => Array.from(lp.subarray(b * W + (W - sequences[r]!.length), (b + 1) * W)));
  }

  it('clipping (both sides), truncation and the KL term are all active in the checked point', async () => {
    const out = await session.run(feedsFor([0, 1, 2], adapter, perturbed));
    expect((out[TRAIN_IO.clippedTokens]!.data as Float64Array)[0]).toBeGreaterThan(0);
    expect((out[TRAIN_IO.truncatedTokens]!.data as Float64Array)[0]).toBeGreaterThan(0);
    expect((out[TRAIN_IO.kl]!.data as Float64Array)[0]).toBeGreaterThan(0);
    const lossTokens = lossMasks.flat().reduce((a, b) => a + b, 0);
    expect((out[TRAIN_IO.clippedTokens]!.data as Float64Array)[0]).toBeLessThan(lossTokens);
  });

  it('d loss / d every LoRA tensor matches central finite differences (≤ 1e-6 relative)', async () => {
    const all = [0, 1, 2];
    const base = await session.run(feedsFor(all, adapter, perturbed));
    const lossAt = async (name: string, index: number, delta: number): Promise<number> => {
      const shifted = new Map(adapter);
      const values = Float64Array.from(adapter.get(name)!);
      values[index] = values[index]! + delta;
      shifted.set(name, values);
      return ((await session.run(feedsFor(all, shifted, perturbed), { outputs: [TRAIN_IO.loss] }))[TRAIN_IO.loss]!.data as Float64Array)[0]!;
    };
    let worst = 0;
    let checked = 0;
    for (const spec of specs) {
      const grad = base[TRAIN_IO.gradient(spec.name)]!.data as Float64Array;
      expect(grad.length).toBe(spec.shape[0] * spec.shape[1]);
      // The two largest entries of every tensor: there the difference quotient is far above rounding.
      const indices = Array.from(grad.keys()).sort((i, j) => Math.abs(grad[j]!) - Math.abs(grad[i]!)).slice(0, 2);
      for (const i of indices) {
        expect(Math.abs(grad[i]!)).toBeGreaterThan(1e-7); // every module gets a real gradient
        const eps = 1e-5;
        const numeric = ((await lossAt(spec.name, i, eps)) - (await lossAt(spec.name, i, -eps))) / (2 * eps);
        const rel = Math.abs(numeric - grad[i]!) / Math.max(Math.abs(numeric), Math.abs(grad[i]!));
        worst = Math.max(worst, rel);
        checked += 1;
      }
    }
    expect(checked).toBe(2 * specs.length);
    expect(worst).toBeLessThanOrEqual(1e-6);
  });

  it('padding leaks nothing: the ragged batch gives the sum of the one-sequence gradients', async () => {
    const batch = await session.run(feedsFor([0, 1, 2], adapter, perturbed));
    const singles = await Promise.all([0, 1, 2].map(async (r) => {
      const one = (rows: number[][]): number[][] => [rows[r]!];
      const extra = { prox: one(perturbed.prox), behaviour: one(perturbed.behaviour), ref: one(perturbed.ref) };
      // Remap: feedsFor indexes the extras by sequence number, so put the row where it expects it.
      const byIndex = (rows: number[][]): number[][] => [0, 1, 2].map((k) => (k === r ? rows[0]! : []));
      return session.run(feedsFor([r], adapter, { prox: byIndex(extra.prox), behaviour: byIndex(extra.behaviour), ref: byIndex(extra.ref) }));
    }));
    for (const spec of specs) {
      const name = TRAIN_IO.gradient(spec.name);
      const total = batch[name]!.data as Float64Array;
      const summed = new Float64Array(total.length);
      for (const s of singles) (s[name]!.data as Float64Array).forEach((v, i) => (summed[i] = summed[i]! + v));
      for (let i = 0; i < total.length; i++) expect(total[i]!).toBeCloseTo(summed[i]!, 12);
    }
    const loss = (batch[TRAIN_IO.loss]!.data as Float64Array)[0]!;
    const lossSum = singles.reduce((a, s) => a + (s[TRAIN_IO.loss]!.data as Float64Array)[0]!, 0);
    expect(loss).toBeCloseTo(lossSum, 12);
  });
});

describe('training graph, full parameters (float64)', () => {
  it('d(SFT loss)/d(base weights: embedding, norms, projections) matches central finite differences', async () => {
    const small = presetConfig('tiny-qwen3', { numLayers: 1 });
    const base = randomWeights(small, { seed: 12, initStd: 0.1 });
    const built = buildTrainingGraph(small, base, { lora, objective: 'sft', parameters: 'full', dtype: 'float64' });
    const names = ['model.embed_tokens.weight', 'model.norm.weight', 'model.layers.0.self_attn.q_proj.weight', 'model.layers.0.self_attn.k_norm.weight', 'model.layers.0.mlp.down_proj.weight'];
    for (const name of names) expect(built.loraNames).toContain(name);
    expect(built.loraNames.some((n) => n.includes('lora_'))).toBe(false);
    const s = await createSession(built.graph.toModel(), { mode: 'direct' });
    try {
      const rows = [sequences[0]!, sequences[1]!];
      const batch = leftPad(rows, small.padTokenId);
      const W = batch.width;
      const mask: number[][] = rows.map((r) => r.map((_, t) => (t > 0 ? 1 : 0)));
      const count = mask.flat().reduce((a, b) => a + b, 0);
      const weightsTensor = tensor('float64', [2, W], Float64Array.from({ length: 2 * W }, (_, k) => {
        const b = Math.floor(k / W);
        const t = (k % W) - batch.padLengths[b]!;
        return t < 0 ? 0 : mask[b]![t]! / count;
      }));
      const values = new Map([...base].map(([k, v]) => [k, Float64Array.from(v.data)]));
      const feeds = (vals: Map<string, Float64Array>): Record<string, TensorData> => ({
        [IO.inputIds]: batch.ids,
        [IO.attentionMask]: batch.mask,
        [IO.temperature]: tensor('float64', [], [1]),
        [TRAIN_IO.tokenWeights]: weightsTensor,
        ...Object.fromEntries([...vals].map(([k, v]) => [k, tensor('float64', base.get(k)!.shape, v)])),
      });
      const out = await s.run(feeds(values));
      for (const name of names) {
        const grad = out[TRAIN_IO.gradient(name)]!.data as Float64Array;
        const i = Array.from(grad.keys()).sort((a, b) => Math.abs(grad[b]!) - Math.abs(grad[a]!))[0]!;
        const at = async (delta: number): Promise<number> => {
          const shifted = new Map(values);
          const v = Float64Array.from(values.get(name)!);
          v[i] = v[i]! + delta;
          shifted.set(name, v);
          return ((await s.run(feeds(shifted), { outputs: [TRAIN_IO.loss] }))[TRAIN_IO.loss]!.data as Float64Array)[0]!;
        };
        const numeric = ((await at(1e-5)) - (await at(-1e-5))) / 2e-5;
        expect(Math.abs(numeric - grad[i]!) / Math.max(Math.abs(numeric), Math.abs(grad[i]!)), name).toBeLessThanOrEqual(1e-6);
      }
    } finally {
      await s.close();
    }
  });
});
