import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSession, tensor, type TensorData } from '@sqlenv/onnx-graph';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JsLoopGreedyDecoder } from '../graphs/decode-step-graph.ts';
import { buildGenerationGraph, GEN_IO } from '../graphs/generation-graph.ts';
import { Generator } from './generator.ts';
import { initLoraWeights, parseLoraConfig } from '../graphs/lora.ts';
import { presetConfig } from '../io/presets.ts';
import { randomWeights } from '../io/random-checkpoint.ts';
import { LogitsModel, Scorer } from './scorer.ts';

const config = presetConfig('tiny-qwen2');
const weights = randomWeights(config, { seed: 21, initStd: 0.15 });
const lora = parseLoraConfig({ rank: 4, alpha: 8, targets: ['q_proj', 'v_proj', 'down_proj'] });
const V = config.vocabSize;
const prompts = [
  [256, 10, 20, 30],
  [256, 1, 2, 3, 4, 5, 6, 7, 8],
  [256, 99, 98, 97, 96, 95],
];

// Prompts of 4, 6 and 9 tokens (padded to 9, or 16 with padToWidth) in chunks of 3: every test
// below runs a prefill of several loop iterations, one chunk of it partly padding.
const PREFILL_CHUNK_TOKENS = 3;

let generator: Generator;
let scorer: Scorer;
let logitsModel: LogitsModel;
beforeAll(async () => {
  [generator, scorer, logitsModel] = await Promise.all([
    Generator.create(config, weights, { lora, prefillChunkTokens: PREFILL_CHUNK_TOKENS }),
    Scorer.create(config, weights, { lora, vocabChunkSize: 128 }),
    LogitsModel.create(config, weights),
  ]);
});
afterAll(async () => {
  await Promise.all([generator.close(), scorer.close(), logitsModel.close()]);
});

function softmax(row: ArrayLike<number>, temperature: number): number[] {
  const scaled = Array.from(row, (x) => x / temperature);
  const max = Math.max(...scaled);
  const exps = scaled.map((x) => Math.exp(x - max));
  const sum = exps.reduce((a, b) => a + b, 0);
  return exps.map((e) => e / sum);
}

/** Pearson χ² of observed counts against expected probabilities; bins with expectation < 5 are pooled. */
function chiSquare(counts: number[], probs: number[], n: number): { statistic: number; dof: number } {
  let statistic = 0;
  let bins = 0;
  let pooledObserved = 0;
  let pooledExpected = 0;
  probs.forEach((p, i) => {
    const expected = p * n;
    if (expected < 5) {
      pooledObserved += counts[i] ?? 0;
      pooledExpected += expected;
      return;
    }
    statistic += ((counts[i] ?? 0) - expected) ** 2 / expected;
    bins++;
  });
  if (pooledExpected > 0) {
    statistic += (pooledObserved - pooledExpected) ** 2 / Math.max(pooledExpected, 1e-9);
    bins++;
  }
  return { statistic, dof: bins - 1 };
}

/** Upper 0.1 % point of χ²(dof), Wilson–Hilferty approximation. */
function chiSquareCritical(dof: number): number {
  const z = 3.09;
  return dof * (1 - 2 / (9 * dof) + z * Math.sqrt(2 / (9 * dof))) ** 3;
}

describe('generation graph', () => {
  it('log-probs of sampled tokens equal the scoring graph on the same tokens (base and LoRA)', async () => {
    const adapter = initLoraWeights(config, lora, { seed: 9, bStd: 0.05 });
    for (const adapterWeights of [undefined, adapter]) {
      const requests = prompts.map((promptIds, i) => ({ promptIds, seed: 100 + i, temperature: 0.8, topP: i === 2 ? 0.9 : 1 }));
      const results = await generator.generate(requests, { maxNewTokens: 12, stopIds: [], ...(adapterWeights ? { lora: adapterWeights } : {}) });
      const sequences = prompts.map((p, i) => [...p, ...results[i]!.tokens]);
      const scored = await scorer.score(sequences, { temperature: 0.8, ...(adapterWeights ? { lora: adapterWeights } : {}) });
      let worst = 0;
      results.forEach((r, i) => {
        expect(r.tokens).toHaveLength(12);
        expect(r.finishReason).toBe('length');
        r.logprobs.forEach((lp, t) => (worst = Math.max(worst, Math.abs(lp - scored[i]![prompts[i]!.length + t]!))));
      });
      expect(worst).toBeLessThanOrEqual(1e-4);
    }
  });

  it('greedy generation equals step-by-step argmax of the teacher-forced forward', async () => {
    const [result] = await generator.generate([{ promptIds: prompts[1]!, temperature: 0 }], { maxNewTokens: 10, stopIds: [] });
    const sequence = [...prompts[1]!];
    for (let step = 0; step < 10; step++) {
      const [logits] = await logitsModel.logits([sequence]);
      const last = (logits as Float32Array).subarray((sequence.length - 1) * V, sequence.length * V);
      sequence.push(last.indexOf(Math.max(...last)));
    }
    expect(result!.tokens).toEqual(sequence.slice(prompts[1]!.length));
    expect(result!.sampleLogprobs.every((x) => x === 0)).toBe(true);
  });

  it('batched with left padding equals unbatched, row by row', async () => {
    const requests = prompts.map((promptIds, i) => ({ promptIds, seed: 7 + i, temperature: 1, topP: 0.95 }));
    const batched = await generator.generate(requests, { maxNewTokens: 8, topK: 40, stopIds: [] });
    for (const [i, request] of requests.entries()) {
      const [single] = await generator.generate([request], { maxNewTokens: 8, topK: 40, stopIds: [] });
      expect(batched[i]!.tokens).toEqual(single!.tokens);
      batched[i]!.logprobs.forEach((lp, t) => expect(Math.abs(lp - single!.logprobs[t]!)).toBeLessThanOrEqual(1e-5));
    }
    // Padding the prompts wider (length buckets) changes nothing either.
    const wide = await generator.generate(requests, { maxNewTokens: 8, topK: 40, stopIds: [], padToWidth: 16 });
    expect(wide.map((r) => r.tokens)).toEqual(batched.map((r) => r.tokens));
  });

  it('is seedable: same seeds give the same tokens, other seeds other tokens', async () => {
    const run = (seed: number) => generator.generate([{ promptIds: prompts[0]!, seed }], { maxNewTokens: 16, stopIds: [] });
    const [a, b, c] = await Promise.all([run(1), run(1), run(2)]);
    expect(a![0]!.tokens).toEqual(b![0]!.tokens);
    expect(a![0]!.tokens).not.toEqual(c![0]!.tokens);
  });

  it('stops each row at its own stop token and pads nothing into the results', async () => {
    const greedy = await generator.generate(
      prompts.map((promptIds) => ({ promptIds, temperature: 0 })),
      { maxNewTokens: 6, stopIds: [] },
    );
    const stopId = greedy[0]!.tokens[0]!;
    const stopped = await generator.generate(
      prompts.map((promptIds) => ({ promptIds, temperature: 0 })),
      { maxNewTokens: 6, stopIds: [stopId] },
    );
    expect(stopped[0]).toMatchObject({ tokens: [stopId], finishReason: 'stop' });
    for (const [i, r] of stopped.entries()) {
      const full = greedy[i]!.tokens;
      const cut = full.indexOf(stopId);
      expect(r.tokens).toEqual(cut < 0 ? full : full.slice(0, cut + 1));
      expect(r.finishReason).toBe(cut < 0 ? 'length' : 'stop');
    }
  });

  it('with min_running ends the run once no more than that many rows are still running; the rows that ran on are unchanged', async () => {
    const rows = prompts.map((promptIds, b) => ({ inputIds: promptIds, uniforms: new Float32Array(8).fill(0.3 + b / 10), temperature: 0 }));
    const full = await generator.runRows(rows, { steps: 8, keepCache: false, stopIds: [] });
    // A stop id that row 0 samples at step 2 and no other row samples by then.
    const stopId = full[0]!.tokens[2]!;
    const firstHit = (tokens: number[]): number => tokens.indexOf(stopId);
    expect(firstHit(full[0]!.tokens)).toBe(2);
    expect(full.slice(1).every((r) => firstHit(r.tokens) === -1 || firstHit(r.tokens) > 2)).toBe(true);
    const early = await generator.runRows(rows, { steps: 8, keepCache: false, stopIds: [stopId], minRunning: 2 });
    expect(early.map((r) => r.steps)).toEqual([3, 3, 3]);
    expect(early[0]).toMatchObject({ tokens: full[0]!.tokens.slice(0, 3), stopped: true });
    for (const b of [1, 2]) expect(early[b]).toMatchObject({ tokens: full[b]!.tokens.slice(0, 3), stopped: false });
    const all = await generator.runRows(rows, { steps: 8, keepCache: false, stopIds: [stopId], minRunning: 0 });
    expect(all[0]!.steps).toBeGreaterThan(3);
  });

  it('samples with the softmax frequencies (χ² test, fixed seeds), and top-k/top-p truncate correctly', async () => {
    const prompt = prompts[2]!;
    const [logits] = await logitsModel.logits([prompt]);
    const lastRow = (logits as Float32Array).subarray((prompt.length - 1) * V, prompt.length * V);
    const n = 3000;
    const temperature = 0.7;
    const requests = Array.from({ length: n }, (_, seed) => ({ promptIds: prompt, seed, temperature }));
    const count = (results: { tokens: number[] }[]): number[] => {
      const counts = new Array<number>(V).fill(0);
      for (const r of results) counts[r.tokens[0]!]!++;
      return counts;
    };

    const probs = softmax(lastRow, temperature);
    const plain = chiSquare(count(await generator.generate(requests, { maxNewTokens: 1, stopIds: [] })), probs, n);
    expect(plain.dof).toBeGreaterThan(5);
    expect(plain.statistic).toBeLessThan(chiSquareCritical(plain.dof));
    // The same counts are far off a wrong distribution (the untempered softmax): the test has power.
    const wrong = chiSquare(count(await generator.generate(requests, { maxNewTokens: 1, stopIds: [] })), softmax(lastRow, 1), n);
    expect(wrong.statistic).toBeGreaterThan(chiSquareCritical(wrong.dof));

    // top-k 20 then top-p 0.6 over the renormalised top-k: the truncated distribution, nothing outside it.
    const order = probs.map((p, i) => [p, i] as const).sort((a, b) => b[0] - a[0]).slice(0, 20);
    const topMass = order.reduce((s, [p]) => s + p, 0);
    let before = 0;
    const nucleus = new Map<number, number>();
    for (const [p, i] of order) {
      if (before / topMass >= 0.6) break;
      nucleus.set(i, p);
      before += p;
    }
    const truncated = probs.map((_, i) => (nucleus.get(i) ?? 0) / before);
    const sampled = await generator.generate(
      requests.map((r) => ({ ...r, topP: 0.6 })),
      { maxNewTokens: 1, topK: 20, stopIds: [] },
    );
    const counts = count(sampled);
    counts.forEach((c, i) => {
      if (!nucleus.has(i)) expect(c).toBe(0);
    });
    const truncatedTest = chiSquare(counts, truncated, n);
    expect(truncatedTest.statistic).toBeLessThan(chiSquareCritical(Math.max(1, truncatedTest.dof)));
    for (const r of sampled.slice(0, 50)) {
      expect(Math.abs(r.sampleLogprobs[0]! - Math.log(truncated[r.tokens[0]!]!))).toBeLessThan(1e-4);
      expect(Math.abs(r.logprobs[0]! - Math.log(probs[r.tokens[0]!]!))).toBeLessThan(1e-4);
    }
  });
});


describe('chunked prefill', () => {
  it('gives the tokens and log-probs of one pass over the whole prompt, for any chunk size', async () => {
    const adapter = initLoraWeights(config, lora, { seed: 5, bStd: 0.05 });
    const requests = prompts.map((promptIds, i) => ({ promptIds, seed: 40 + i, temperature: 1, topP: i === 1 ? 0.9 : 1 }));
    const options = { maxNewTokens: 10, topK: 50, stopIds: [], lora: adapter, padToWidth: 13 };
    const whole = await Generator.create(config, weights, { lora, prefillChunkTokens: Infinity });
    const expected = await whole.generate(requests, options);
    await whole.close();
    for (const chunk of [1, 2, 4, 13, 128]) {
      const chunked = await Generator.create(config, weights, { lora, prefillChunkTokens: chunk });
      const results = await chunked.generate(requests, options);
      await chunked.close();
      results.forEach((r, i) => {
        expect(r.tokens, `chunk ${chunk} row ${i}`).toEqual(expected[i]!.tokens);
        r.logprobs.forEach((lp, t) => expect(Math.abs(lp - expected[i]!.logprobs[t]!), `chunk ${chunk} row ${i} token ${t}`).toBeLessThanOrEqual(1e-5));
        r.sampleLogprobs.forEach((lp, t) => expect(Math.abs(lp - expected[i]!.sampleLogprobs[t]!)).toBeLessThanOrEqual(1e-5));
      });
    }
  });

  it('refuses a chunk size that is not a positive integer', async () => {
    for (const bad of [0, -2, 2.5, Number.NaN]) {
      await expect(Generator.create(config, weights, { prefillChunkTokens: bad })).rejects.toThrow(/prefillChunkTokens must be an integer ≥ 1 or Infinity, got/);
    }
  });
});

describe('Generator from a model file', () => {
  it('samples what the in-memory generator samples, can release the weights and outlives its files', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sqlenv-generator-file-'));
    const own = new Map(weights); // releaseWeights empties the map it is given
    let fromFile: Generator | undefined;
    try {
      fromFile = await Generator.create(config, own, { lora, modelFile: join(dir, 'generation.onnx'), releaseWeights: true });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(own.size).toBe(0);
    const requests = prompts.map((promptIds, i) => ({ promptIds, seed: 40 + i, temperature: 0.9, topP: 0.9 }));
    const options = { maxNewTokens: 6, topK: 20, stopIds: [] };
    expect(await fromFile.generate(requests, options)).toEqual(await generator.generate(requests, options));
    await fromFile.close();
    await expect(Generator.create(config, new Map(weights), { releaseWeights: true })).rejects.toThrow(/releaseWeights needs modelFile/);
  });
});

describe('released weights', () => {
  it('are collected while the generator is created: the weights are resident once, as ORT\'s mapping of the file', async () => {
    // 16 MB of float32 weights, referenced by nothing but the map handed over.
    const big = presetConfig('tiny-qwen2', { hiddenSize: 256, intermediateSize: 1024, numLayers: 4, headDim: 64 });
    const own = randomWeights(big, { seed: 3 });
    const weightBytes = [...own.values()].reduce((sum, t) => sum + t.data.byteLength, 0);
    expect(weightBytes).toBeGreaterThan(15e6);
    const dir = mkdtempSync(join(tmpdir(), 'sqlenv-generator-release-'));
    const before = process.memoryUsage().arrayBuffers;
    let released: Generator | undefined;
    try {
      released = await Generator.create(big, own, { modelFile: join(dir, 'generation.onnx'), releaseWeights: true });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    // Without a collection the arrays stay allocated until V8's next major GC, which nothing here triggers.
    expect(before - process.memoryUsage().arrayBuffers).toBeGreaterThan(0.9 * weightBytes);
    const [row] = await released.generate([{ promptIds: [256, 1, 2, 3], seed: 1 }], { maxNewTokens: 3, stopIds: [] });
    expect(row?.tokens).toHaveLength(3);
    await released.close();
  });
});

describe('the generation graph holds the cache once', () => {
  it('prefills in one Loop per layer before the decode loop, and returns the cache only when keep_cache asks for it', async () => {
    const { graph } = buildGenerationGraph(config, weights, { prefillChunkTokens: PREFILL_CHUNK_TOKENS });
    const model = graph.toModel();
    // One Loop per layer over the prompt's chunks (carrying the layer's output), then the decode loop.
    const loops = model.proto.graph.node.filter((n) => n.opType === 'Loop');
    expect(loops).toHaveLength(config.numLayers + 1);
    const session = await createSession(model, { mode: 'direct' });
    const B = 2;
    const P = 7;
    const N = 4;
    const { numLayers, numKvHeads: Hkv, headDim: D } = config;
    const feeds: Record<string, TensorData> = {
      input_ids: tensor('int64', [B, P], Array.from({ length: B * P }, (_, i) => 10 + i)),
      attention_mask: tensor('int64', [B, P], Array.from({ length: B * P }, (_, i) => (i === 0 ? 0 : 1))),
      [GEN_IO.uniforms]: tensor('float32', [B, N], Array.from({ length: B * N }, (_, i) => (i * 0.37) % 1)),
      [GEN_IO.temperature]: tensor('float32', [B], [1, 1]),
      [GEN_IO.topP]: tensor('float32', [B], [1, 1]),
      [GEN_IO.topK]: tensor('int64', [], [0]),
      [GEN_IO.stopIds]: tensor('int64', [1], [-1]),
      [GEN_IO.pastMask]: tensor('int64', [B, 0], []),
      [GEN_IO.minRunning]: tensor('int64', [], [0]),
    };
    for (let i = 0; i < numLayers; i++) {
      feeds[GEN_IO.pastKey(i)] = tensor('float32', [B, Hkv, 0, D], []);
      feeds[GEN_IO.pastValue(i)] = tensor('float32', [B, Hkv, 0, D], []);
    }
    const run = (keep: boolean) => session.run({ ...feeds, [GEN_IO.keepCache]: tensor('bool', [], [keep]) });
    const [dropped, kept] = [await run(false), await run(true)];
    expect(dropped[GEN_IO.tokens]).toEqual(kept[GEN_IO.tokens]);
    // Every slot fed: the prompt and the first N − 1 sampled tokens.
    expect(kept[GEN_IO.presentKey(0)]?.dims).toEqual([B, Hkv, P + N - 1, D]);
    expect(kept[GEN_IO.presentValue(numLayers - 1)]?.dims).toEqual([B, Hkv, P + N - 1, D]);
    expect(dropped[GEN_IO.presentKey(0)]?.dims).toEqual([B, Hkv, 0, D]);
    expect(dropped[GEN_IO.presentMask]?.dims).toEqual([B, P + N - 1]);
    await session.close();
  });
});

describe('per-token JavaScript loop over the step graph (benchmark baseline)', () => {
  it('produces the same greedy tokens as the in-graph loop', async () => {
    const decoder = await JsLoopGreedyDecoder.create(config, weights);
    const jsTokens = await decoder.generate(prompts, 7);
    const inGraph = await generator.generate(prompts.map((promptIds) => ({ promptIds, temperature: 0 })), { maxNewTokens: 7, stopIds: [] });
    expect(jsTokens).toEqual(inGraph.map((r) => r.tokens));
    await decoder.close();
  });
});
