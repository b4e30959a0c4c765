import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Logger } from '@sqlenv/shared';
import { DEFAULT_PREFILL_CHUNK_TOKENS } from '../graphs/generation-graph.ts';
import { Generator } from './generator.ts';
import { InferenceEngine, replicaPlan, type InferenceEngineOptions } from './inference-engine.ts';
import { initLoraWeights, parseLoraConfig, zeroLoraWeights } from '../graphs/lora.ts';
import { presetConfig } from '../io/presets.ts';
import { writeRandomCheckpoint } from '../io/random-checkpoint.ts';
import { loadModel } from '../io/weights.ts';

const dir = mkdtempSync(join(tmpdir(), 'sqlenv-engine-'));
const config = presetConfig('tiny-llama');
const lora = parseLoraConfig({ rank: 2, alpha: 4 });
writeRandomCheckpoint(dir, config, { seed: 4, initStd: 0.15, dtype: 'BF16' });

let engine: InferenceEngine;
let direct: Generator;
beforeAll(async () => {
  const { weights } = loadModel(dir);
  [engine, direct] = await Promise.all([
    // Without pre-packing (one weight copy) and loaded through a model file, the engine must sample
    // exactly what the default in-memory session does.
    InferenceEngine.start({ modelDir: dir, lora, topK: 30, experimental: { batchWindowMs: 20, lengthBucketTokens: 8, disablePrepacking: true, loadViaFile: true } }),
    Generator.create(config, weights, { lora }),
  ]);
});
afterAll(async () => {
  await Promise.all([engine.close(), direct.close()]);
  rmSync(dir, { recursive: true, force: true });
});

const turns = Array.from({ length: 10 }, (_, i) => ({
  promptIds: Array.from({ length: 3 + ((i * 5) % 11) }, (_, t) => (t * 13 + i) % 256),
  seed: 1000 + i,
  temperature: i % 3 === 0 ? 0 : 0.9,
  topP: i % 2 === 0 ? 1 : 0.8,
  maxNewTokens: 4 + (i % 4) * 3,
}));

describe('InferenceEngine', () => {
  it('batches concurrent turns into one worker run and returns what each turn alone would get', async () => {
    const results = await Promise.all(turns.map((t) => engine.generate(t)));
    // All ten admitted at once with nothing else to wait for: prefill and the whole decode (≤ 13 steps) in one run.
    expect(engine.stats).toMatchObject({ runs: 1, rows: 10, turns: 10, meanBatchSize: 10, generatedTokens: results.reduce((n, r) => n + r.tokens.length, 0) });
    for (const [i, turn] of turns.entries()) {
      const [alone] = await direct.generate([turn], { maxNewTokens: turn.maxNewTokens, topK: 30 });
      expect(results[i]!.tokens).toEqual(alone!.tokens);
      expect(results[i]!.tokens.length).toBeLessThanOrEqual(turn.maxNewTokens);
      results[i]!.logprobs.forEach((lp, t) => expect(Math.abs(lp - alone!.logprobs[t]!)).toBeLessThan(1e-5));
      expect(results[i]!.policyVersion).toBe(0);
    }
  });

  it('swaps LoRA weights between runs without rebuilding, tagging turns with the policy version', async () => {
    const turn = { ...turns[1]!, maxNewTokens: 12 };
    const base = await engine.generate(turn);
    const adapter = initLoraWeights(config, lora, { seed: 5, bStd: 0.5 });
    await engine.setLora(adapter, 1);
    const adapted = await engine.generate(turn);
    expect(adapted.policyVersion).toBe(1);
    const [expected] = await direct.generate([turn], { maxNewTokens: 12, topK: 30, lora: adapter });
    expect(adapted.tokens).toEqual(expected!.tokens);
    expect(adapted.logprobs).not.toEqual(base.logprobs);
    await engine.setLora(zeroLoraWeights(config, lora), 2);
    const reference = await engine.generate(turn);
    expect(reference.tokens).toEqual(base.tokens);
    expect(reference.policyVersion).toBe(2);
  });

  it('tags each batch with the version the worker thread used, even while a swap is in flight', async () => {
    const racing = await InferenceEngine.start({ modelDir: dir, lora, topK: 30, experimental: { batchWindowMs: 0 } });
    try {
      const turn = { ...turns[3]!, maxNewTokens: 8 };
      const adapter = initLoraWeights(config, lora, { seed: 9, bStd: 0.5 });
      // Posted before the swap: sampled with version 0.
      const before = racing.generate(turn);
      // With no batch window the turn is posted at once, right behind the swap and before its
      // acknowledgement: the worker applies the swap first, so the turn must say version 1.
      const swap = racing.setLora(adapter, 1);
      const after = racing.generate(turn);
      const [b, a] = await Promise.all([before, after, swap]);
      expect(b.policyVersion).toBe(0);
      expect(a.policyVersion).toBe(1);
      const [expected] = await direct.generate([turn], { maxNewTokens: 8, topK: 30, lora: adapter });
      expect(a.tokens).toEqual(expected!.tokens);
      // Moving the version without new tensors keeps the adapter.
      await racing.setLora(null, 2);
      const kept = await racing.generate(turn);
      expect(kept).toMatchObject({ policyVersion: 2, tokens: expected!.tokens });
      expect(racing.policyVersion).toBe(2);
    } finally {
      await racing.close();
    }
  });

  it('splits pending turns into runs whose prefill attention scores fit the memory bound', async () => {
    // tiny-llama: 4 heads; 16-token prompts in 8-token buckets: 4 × 16² × 4 B = 4 KiB of scores per row.
    // The static engine (one batch at a time, no cache kept): each batch is one prefill run.
    const bounded = await InferenceEngine.start({ modelDir: dir, experimental: { lengthBucketTokens: 8, batchWindowMs: 20, maxPrefillScoresBytes: 8192, reuseKv: false, batching: 'static' } });
    try {
      const six = Array.from({ length: 6 }, (_, i) => ({ promptIds: Array.from({ length: 16 }, (_, t) => (t * 5 + i) % 256), seed: i, temperature: 0.8, maxNewTokens: 5 }));
      const results = await Promise.all(six.map((t) => bounded.generate(t)));
      expect(bounded.stats).toMatchObject({ runs: 3, rows: 6, meanBatchSize: 2 });
      const { weights } = loadModel(dir);
      const plain = await Generator.create(config, weights);
      try {
        for (const [i, turn] of six.entries()) {
          const [alone] = await plain.generate([turn], { maxNewTokens: 5 });
          expect(results[i]!.tokens).toEqual(alone!.tokens);
        }
      } finally {
        await plain.close();
      }
      // A single turn over the bound still runs (alone).
      const long = await bounded.generate({ promptIds: Array.from({ length: 40 }, (_, t) => t), maxNewTokens: 2 });
      expect(long.tokens.length).toBeGreaterThan(0);
    } finally {
      await bounded.close();
    }
  });

  it('counts the chunked prefill: a context past one chunk is bounded by min(C, width) × width, not width²', async () => {
    // 160-token prompts on 4 heads: chunked scores 4 × 128 × 160 × 4 B = 320 KiB a row, a whole-prompt pass 400 KiB.
    // A 700,000-byte bound takes two rows a run (640 KiB); counting width² it would take one.
    expect(DEFAULT_PREFILL_CHUNK_TOKENS).toBe(128);
    // Static scheduling (one run per admitted batch) makes the run count the number of prefill batches.
    const bounded = await InferenceEngine.start({ modelDir: dir, experimental: { lengthBucketTokens: 8, batchWindowMs: 20, maxPrefillScoresBytes: 700_000, reuseKv: false, batching: 'static' } });
    try {
      const four = Array.from({ length: 4 }, (_, i) => ({ promptIds: Array.from({ length: 160 }, (_, t) => (t * 3 + i) % 256), seed: i, maxNewTokens: 2 }));
      await Promise.all(four.map((t) => bounded.generate(t)));
      expect(bounded.stats).toMatchObject({ runs: 2, rows: 4, turns: 4 });
      expect(bounded.stats.meanBatchSize).toBe(2);
    } finally {
      await bounded.close();
    }
  });

  it('replicas: episodes spread over engine threads, each keeping its cache, with the tokens of one engine', async () => {
    const two = await InferenceEngine.start({ modelDir: dir, lora, replicas: 2, topK: 30, experimental: { batchWindowMs: 5, lengthBucketTokens: 8 } });
    try {
      expect(two.replicas).toBe(2);
      const adapter = initLoraWeights(config, lora, { seed: 7, bStd: 0.5 });
      await two.setLora(adapter, 3);
      expect(two.policyVersion).toBe(3);
      // Six episodes of three turns: each turn's prompt extends the last context by the reply and an observation.
      const episode = async (e: number): Promise<number[][]> => {
        let context = Array.from({ length: 9 + e }, (_, t) => (t * 7 + e) % 256);
        const replies: number[][] = [];
        for (let turn = 0; turn < 3; turn++) {
          const request = { promptIds: context, seed: 100 * e + turn, temperature: 0.9, maxNewTokens: 6, cacheKey: `episode-${e}` };
          const result = await two.generate(request);
          expect(result.policyVersion).toBe(3);
          const [alone] = await direct.generate([request], { maxNewTokens: 6, topK: 30, lora: adapter });
          expect(result.tokens).toEqual(alone!.tokens);
          result.logprobs.forEach((lp, t) => expect(Math.abs(lp - alone!.logprobs[t]!)).toBeLessThan(1e-5));
          replies.push(result.tokens);
          context = [...context, ...result.tokens, 40 + turn, 41, 42];
        }
        return replies;
      };
      await Promise.all(Array.from({ length: 6 }, (_, e) => episode(e)));
      // Both threads ran turns, and every later turn continued its episode's own cache (it stayed on its replica).
      const stats = two.stats;
      expect(stats.turns).toBe(18);
      expect(stats.runs).toBeGreaterThanOrEqual(2);
      expect(stats.reusedTokens - stats.sharedTokens).toBeGreaterThan(0);
      expect(stats.meanBatchSize).toBeGreaterThan(0);
      expect(two.replicaStats.map((r) => r.turns % 3)).toEqual([0, 0]);
      for (const r of two.replicaStats) expect(r.turns).toBeGreaterThan(0);
    } finally {
      await two.close();
    }
  });

  it('replicaPlan: a small model on the CPU runs as several engine threads, a big one or a GPU as one', () => {
    expect(replicaPlan({ provider: 'cpu', threads: 2, maxBatchSize: 32, weightBytes: 8e6 })).toEqual({ replicas: 2, intraOpThreads: 1 });
    expect(replicaPlan({ provider: 'cpu', threads: 16, maxBatchSize: 32, weightBytes: 8e6 })).toEqual({ replicas: 2, intraOpThreads: 8 });
    expect(replicaPlan({ provider: 'cpu', threads: 2, maxBatchSize: 8, weightBytes: 8e6 })).toEqual({ replicas: 1, intraOpThreads: 2 });
    expect(replicaPlan({ provider: 'cpu', threads: 16, maxBatchSize: 32, weightBytes: 2.4e9 })).toEqual({ replicas: 1, intraOpThreads: 16 });
    expect(replicaPlan({ provider: 'cuda', threads: 16, maxBatchSize: 64, weightBytes: 8e6 })).toEqual({ replicas: 1, intraOpThreads: 16 });
    // An explicit count wins and still splits the threads.
    expect(replicaPlan({ provider: 'cpu', threads: 2, maxBatchSize: 32, weightBytes: 8e6, replicas: 1 })).toEqual({ replicas: 1, intraOpThreads: 2 });
    expect(replicaPlan({ provider: 'cpu', threads: 2, maxBatchSize: 32, weightBytes: 2.4e9, replicas: 3 })).toEqual({ replicas: 3, intraOpThreads: 1 });
  });

  it('keeps ONNX Runtime\'s CPU arena on by default; cpuMemArena: false reaches the generation session', async () => {
    for (const cpuMemArena of [undefined, false]) {
      // The engine's logger: what it logs with each message.
      const logged = new Map<string, unknown>();
      const logger = { child: () => logger, info: (fields: unknown, msg: string) => logged.set(msg, fields), debug: () => {}, warn: () => {} } as unknown as Logger;
      const e = await InferenceEngine.start({ modelDir: dir, replicas: 2, ...(cpuMemArena === undefined ? {} : { cpuMemArena }) }, logger);
      try {
        expect(logged.get('session created')).toMatchObject({ cpuMemArena: cpuMemArena ?? true, replicas: 2 });
      } finally {
        await e.close();
      }
    }
    await expect(InferenceEngine.start({ modelDir: dir, cpuMemArena: 'off' as unknown as boolean })).rejects.toThrow(/invalid inference engine options: .*cpuMemArena/);
    // The continuous-batching options are checked the same way, before any thread starts.
    await expect(InferenceEngine.start({ modelDir: dir, experimental: { chunkStopShare: 1.5 } })).rejects.toThrow(/invalid inference engine options: .*chunkStopShare/);
    await expect(InferenceEngine.start({ modelDir: dir, experimental: { chunkStopShare: 0 } })).rejects.toThrow(/invalid inference engine options: .*chunkStopShare/);
    await expect(InferenceEngine.start({ modelDir: dir, experimental: { batching: 'fifo' as 'static' } })).rejects.toThrow(/invalid inference engine options: .*batching/);
    // A measurement knob outside `experimental` (or any unknown key) is refused, not silently dropped.
    await expect(InferenceEngine.start({ modelDir: dir, chunkSteps: 4 } as InferenceEngineOptions)).rejects.toThrow(/invalid inference engine options: .*chunkSteps/);
  });

  it('fails fast on bad requests and after close', async () => {
    await expect(engine.generate({ promptIds: [1], maxNewTokens: 0 })).rejects.toMatchObject({ code: 'VALIDATION' });
    await expect(engine.generate({ promptIds: [config.vocabSize + 5], maxNewTokens: 2 })).rejects.toMatchObject({ code: 'VALIDATION' });
    await expect(InferenceEngine.start({ modelDir: join(dir, 'missing') })).rejects.toMatchObject({ code: 'MODEL' });
    await expect(InferenceEngine.start({ modelDir: join(dir, 'missing'), replicas: 2 })).rejects.toMatchObject({ code: 'MODEL' });
    await expect(InferenceEngine.start({ modelDir: dir, replicas: 0 })).rejects.toMatchObject({ code: 'VALIDATION', message: expect.stringMatching(/replicas/) });
    const closed = await InferenceEngine.start({ modelDir: dir });
    await closed.close();
    await closed.close();
    await expect(closed.generate({ promptIds: [1], maxNewTokens: 2 })).rejects.toMatchObject({ code: 'ABORTED' });
  });
});
