import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Generator } from './generator.ts';
import { InferenceEngine, type ExperimentalEngineOptions, type InferenceEngineOptions, type TurnResult } from './inference-engine.ts';
import { initLoraWeights, parseLoraConfig, type LoraWeights } from '../graphs/lora.ts';
import { presetConfig } from '../io/presets.ts';
import { writeRandomCheckpoint } from '../io/random-checkpoint.ts';
import { loadModel } from '../io/weights.ts';

/**
 * Per-episode KV caches and continuous batching must not change a single token:
 * episodes played with cache reuse (and chunked decoding) against the static
 * engine that re-prefills every turn, with the same seeds.
 */
const dir = mkdtempSync(join(tmpdir(), 'sqlenv-kv-reuse-'));
const config = presetConfig('tiny-qwen3');
const lora = parseLoraConfig({ rank: 2, alpha: 4 });
writeRandomCheckpoint(dir, config, { seed: 8, initStd: 0.2 });
// Common ids of this random model as stop tokens, so turns end at different steps inside chunks.
const stopIds = [3, 7, 11, 40, 41, 42, 43];
const common = { modelDir: dir, lora, topK: 0, stopIds } satisfies InferenceEngineOptions;
const commonKnobs = { batchWindowMs: 5, lengthBucketTokens: 8 } satisfies ExperimentalEngineOptions;
/** The common options with these measurement knobs (and public options) on top. */
const engineWith = (knobs: ExperimentalEngineOptions, options: Partial<InferenceEngineOptions> = {}): InferenceEngineOptions => ({ ...common, ...options, experimental: { ...commonKnobs, ...knobs } });
const staticEngineOptions = engineWith({ reuseKv: false, batching: 'static' });

interface Episode {
  key: string;
  seed: number;
  /** Tokens appended after each turn's completion (the next observation). */
  observations: number[][];
  temperature: number;
  topP: number;
}

const episodes: Episode[] = Array.from({ length: 6 }, (_, e) => ({
  key: `episode-${e}`,
  seed: 500 + e * 7,
  observations: Array.from({ length: 4 }, (_, t) => Array.from({ length: 3 + ((e + t * 5) % 9) }, (_, i) => (i * 29 + e * 13 + t * 7) % 256)),
  temperature: e % 3 === 0 ? 0 : 1,
  topP: e % 2 === 0 ? 1 : 0.9,
}));

/** Play every episode's turns concurrently; `between(turn)` runs when all episodes have finished that turn. */
async function play(engine: InferenceEngine, between?: (turn: number) => Promise<void>, played: readonly Episode[] = episodes): Promise<TurnResult[][]> {
  const results: TurnResult[][] = played.map(() => []);
  const contexts = played.map((e) => [...(e.observations[0] as number[])]);
  const turns = played[0]!.observations.length;
  for (let turn = 0; turn < turns; turn++) {
    await Promise.all(
      played.map(async (e, i) => {
        const context = contexts[i] as number[];
        const result = await engine.generate({
          promptIds: context,
          maxNewTokens: 4 + ((i + turn) % 4) * 5,
          seed: e.seed * 100 + turn,
          temperature: e.temperature,
          topP: e.topP,
          cacheKey: e.key,
        });
        results[i]!.push(result);
        context.push(...result.tokens, ...(e.observations[turn + 1] ?? []));
      }),
    );
    await between?.(turn);
  }
  return results;
}

function expectSameTurns(actual: TurnResult[][], expected: TurnResult[][]): void {
  expect(actual.length).toBe(expected.length);
  actual.forEach((turns, e) =>
    turns.forEach((r, t) => {
      const want = expected[e]![t]!;
      expect({ episode: e, turn: t, tokens: r.tokens, finishReason: r.finishReason, version: r.policyVersion }).toEqual({
        episode: e,
        turn: t,
        tokens: want.tokens,
        finishReason: want.finishReason,
        version: want.policyVersion,
      });
      r.logprobs.forEach((lp, i) => expect(Math.abs(lp - want.logprobs[i]!)).toBeLessThanOrEqual(1e-5));
      r.sampleLogprobs.forEach((lp, i) => expect(Math.abs(lp - want.sampleLogprobs[i]!)).toBeLessThanOrEqual(1e-5));
    }),
  );
}

let reference: TurnResult[][];
let referenceStats: InferenceEngine['stats'];
beforeAll(async () => {
  const engine = await InferenceEngine.start(staticEngineOptions);
  try {
    reference = await play(engine);
    referenceStats = engine.stats;
  } finally {
    await engine.close();
  }
}, 120_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('KV cache reuse across turns and continuous batching', () => {
  it('plays the same tokens and log-probs as re-prefilling every turn, prefilling only the appended tokens', async () => {
    const engine = await InferenceEngine.start(engineWith({ chunkSteps: 3 }));
    try {
      const results = await play(engine);
      expectSameTurns(results, reference);
      const stats = engine.stats;
      const turns = episodes.length * episodes[0]!.observations.length;
      expect(stats.turns).toBe(turns);
      // Every turn after an episode's first continues its cache.
      expect(stats.reusedTokens).toBeGreaterThan(0);
      expect(stats.prefillTokens + stats.reusedTokens).toBe(referenceStats.prefillTokens);
      expect(stats.prefillTokens).toBeLessThan(referenceStats.prefillTokens / 2);
      // Finished rows leave between chunks instead of decoding padding until the longest stops.
      expect(stats.rowSteps / stats.generatedTokens).toBeLessThan(referenceStats.rowSteps / referenceStats.generatedTokens);
    } finally {
      await engine.close();
    }
  }, 120_000);

  it('re-prefills exactly after an eviction (a budget of a few tokens) and after a prompt that does not extend the cache', async () => {
    // tiny-qwen3: 2 layers × 2 (k, v) × 2 kv heads × 24 × 4 B = 768 B per token.
    const engine = await InferenceEngine.start(engineWith({ chunkSteps: 2 }, { kvCacheBytes: 768 * 60 }));
    try {
      expectSameTurns(await play(engine), reference);
      expect(engine.stats.evictions).toBeGreaterThan(0);
      // The same key with an unrelated prompt: the cache is not used, the turn is what a fresh prefill gives.
      const turn = { promptIds: [9, 8, 7, 6, 5], maxNewTokens: 6, seed: 3, temperature: 1 };
      const fresh = await engine.generate({ ...turn, cacheKey: episodes[5]!.key });
      const plain = await engine.generate(turn);
      expect(fresh.tokens).toEqual(plain.tokens);
    } finally {
      await engine.close();
    }
  }, 120_000);

  it('drops the caches computed under the old adapter on a swap: the same tokens as re-prefilling under the new one', async () => {
    const adapters: LoraWeights[] = [initLoraWeights(config, lora, { seed: 31, bStd: 0.5 }), initLoraWeights(config, lora, { seed: 32, bStd: 0.5 })];
    const swapAfter = (engine: InferenceEngine) => async (turn: number) => {
      if (turn < adapters.length) await engine.setLora(adapters[turn] as LoraWeights, turn + 1);
    };
    const plain = await InferenceEngine.start(staticEngineOptions);
    const reusing = await InferenceEngine.start(engineWith({ chunkSteps: 4 }));
    try {
      const expected = await play(plain, swapAfter(plain));
      const before = reusing.stats;
      const results = await play(reusing, swapAfter(reusing));
      expectSameTurns(results, expected);
      expect(results.map((turns) => turns.map((r) => r.policyVersion))).toEqual(episodes.map(() => [0, 1, 2, 2]));
      // Only the last turn (after the last swap) could continue a cache.
      const reusedLastTurn = reusing.stats.reusedTokens - before.reusedTokens;
      const lastPrompts = expected.reduce((n, turns, e) => n + turns.slice(0, 3).reduce((m, r) => m + r.tokens.length, 0) + episodes[e]!.observations.slice(0, 3).reduce((m, o) => m + o.length, 0), 0);
      expect(reusedLastTurn).toBe(lastPrompts - episodes.length);
    } finally {
      await Promise.all([plain.close(), reusing.close()]);
    }
  }, 120_000);

  it('an adapter swap while a turn decodes: that turn ends under the old adapter, one submitted after it runs under the new one, each as alone', async () => {
    const engine = await InferenceEngine.start(engineWith({ chunkSteps: 2, batchWindowMs: 0 }, { stopIds: [] }));
    const { weights } = loadModel(dir);
    const alone = await Generator.create(config, weights, { lora });
    const next = initLoraWeights(config, lora, { seed: 33, bStd: 0.5 });
    try {
      const long = { promptIds: Array.from({ length: 9 }, (_, t) => (t * 13 + 5) % 256), maxNewTokens: 24, seed: 71, temperature: 1 };
      const short = { promptIds: Array.from({ length: 6 }, (_, t) => (t * 19 + 2) % 256), maxNewTokens: 4, seed: 72, temperature: 1 };
      const first = engine.generate({ ...long, cacheKey: 'a' });
      await new Promise((resolve) => setTimeout(resolve, 20));
      const swapped = engine.setLora(next, 1);
      const second = engine.generate({ ...short, cacheKey: 'b' });
      const [a, b] = await Promise.all([first, second, swapped]);
      const [wantA] = await alone.generate([long], { maxNewTokens: long.maxNewTokens, stopIds: [] });
      const [wantB] = await alone.generate([short], { maxNewTokens: short.maxNewTokens, stopIds: [], lora: next });
      expect({ tokens: a.tokens, version: a.policyVersion }).toEqual({ tokens: wantA!.tokens, version: 0 });
      expect({ tokens: b.tokens, version: b.policyVersion }).toEqual({ tokens: wantB!.tokens, version: 1 });
      a.logprobs.forEach((lp, k) => expect(Math.abs(lp - wantA!.logprobs[k]!)).toBeLessThanOrEqual(1e-5));
      b.logprobs.forEach((lp, k) => expect(Math.abs(lp - wantB!.logprobs[k]!)).toBeLessThanOrEqual(1e-5));
    } finally {
      await Promise.all([engine.close(), alone.close()]);
    }
  }, 120_000);

  it('decodes turns together whose prefills the scores bound runs one at a time (as Qwen3-0.6B shapes at 1,536 tokens)', async () => {
    // tiny-qwen3: 4 heads; 64-token prompts: 4 × 64 × 64 × 4 B = 64 KiB of scores per row, the bound lets one through.
    const bound = { maxPrefillScoresBytes: 100_000 };
    const turns = Array.from({ length: 8 }, (_, i) => ({ promptIds: Array.from({ length: 64 }, (_, t) => (t * 11 + i * 5) % 256), maxNewTokens: 12, seed: 40 + i, temperature: 1 }));
    const staticEngine = await InferenceEngine.start(engineWith({ reuseKv: false, batching: 'static', ...bound }, { stopIds: [] }));
    const engine = await InferenceEngine.start(engineWith({ ...bound, chunkSteps: 16 }, { stopIds: [] }));
    try {
      const expected = await Promise.all(turns.map((t) => staticEngine.generate(t)));
      const results = await Promise.all(turns.map((t) => engine.generate(t)));
      expect(results.map((r) => r.tokens)).toEqual(expected.map((r) => r.tokens));
      expect(staticEngine.stats).toMatchObject({ runs: 8, meanBatchSize: 1 });
      // Eight prefill runs of one row (one step each), then one chunk of 11 steps with all eight.
      expect(engine.stats).toMatchObject({ runs: 9, steps: 8 + 11, rowSteps: 8 + 8 * 11 });
    } finally {
      await Promise.all([staticEngine.close(), engine.close()]);
    }
  }, 120_000);

  it.each([
    ['the batch cache kept in place between chunks (resident batch)', 1, 2],
    ['runs of up to 6 steps that end once any row stops', 0.01, 6],
  ])('continuous batching, %s: turns that join and leave between chunks get what each alone gets', async (_, chunkStopShare, chunkSteps) => {
    const engine = await InferenceEngine.start(engineWith({ chunkSteps, batchWindowMs: 0, chunkStopShare }));
    const { weights } = loadModel(dir);
    const alone = await Generator.create(config, weights, { lora });
    try {
      const turns = Array.from({ length: 12 }, (_, i) => ({
        promptIds: Array.from({ length: 2 + ((i * 7) % 13) }, (_, t) => (t * 17 + i * 3) % 256),
        maxNewTokens: 3 + ((i * 5) % 14),
        seed: 90 + i,
        temperature: i % 4 === 0 ? 0 : 1,
        topP: i % 3 === 0 ? 0.8 : 1,
      }));
      // Staggered arrivals: later turns arrive while earlier ones are mid-decode.
      const results = await Promise.all(
        turns.map(async (t, i) => {
          for (let k = 0; k < i; k++) await new Promise<void>((resolve) => setImmediate(resolve));
          return engine.generate(t);
        }),
      );
      for (const [i, t] of turns.entries()) {
        const [one] = await alone.generate([t], { maxNewTokens: t.maxNewTokens, stopIds });
        expect({ i, tokens: results[i]!.tokens, finishReason: results[i]!.finishReason }).toEqual({ i, tokens: one!.tokens, finishReason: one!.finishReason });
        results[i]!.logprobs.forEach((lp, k) => expect(Math.abs(lp - one!.logprobs[k]!)).toBeLessThanOrEqual(1e-5));
      }
      const stats = engine.stats;
      expect(stats.turns).toBe(turns.length);
      expect(stats.generatedTokens).toBe(results.reduce((n, r) => n + r.tokens.length, 0));
      // Turns ran together, and at most one chunk of steps per turn is computed past its end.
      expect(stats.meanBatchSize).toBeGreaterThan(2);
      expect(stats.rowSteps).toBeLessThanOrEqual(stats.generatedTokens + turns.length * chunkSteps);
      // Chunks fed the resident batch's arrays, or (without it) the previous run's outputs when their rows were its rows in order, uncopied (and stayed exact).
      expect(stats.uncopiedRuns).toBeGreaterThan(0);
      expect(stats.uncopiedRuns).toBeLessThan(stats.runs);
    } finally {
      await Promise.all([engine.close(), alone.close()]);
    }
  }, 120_000);
});

/**
 * Episodes whose first prompts share a 40-token system prompt, in groups of three that share the
 * whole first prompt (system + a 20-token question), as GRPO groups do; later observations differ.
 */
const SYSTEM = Array.from({ length: 40 }, (_, i) => (i * 37 + 5) % 256);
const grouped: Episode[] = Array.from({ length: 9 }, (_, e) => {
  const group = Math.floor(e / 3);
  const question = Array.from({ length: 20 }, (_, i) => (i * 53 + group * 101 + 17) % 256);
  return {
    key: `grouped-${e}`,
    seed: 900 + e * 11,
    observations: [[...SYSTEM, ...question], ...Array.from({ length: 2 }, (_, t) => Array.from({ length: 3 + ((e + t) % 5) }, (_, i) => (i * 31 + e * 19 + t * 3) % 256))],
    temperature: e % 4 === 0 ? 0 : 1,
    topP: e % 2 === 0 ? 1 : 0.9,
  };
});

describe('shared prompt prefixes across episodes', () => {
  let groupedReference: TurnResult[][];
  let groupedReferenceStats: InferenceEngine['stats'];
  beforeAll(async () => {
    const engine = await InferenceEngine.start(staticEngineOptions);
    try {
      groupedReference = await play(engine, undefined, grouped);
      groupedReferenceStats = engine.stats;
    } finally {
      await engine.close();
    }
  }, 120_000);

  it('starts first turns from the shared prefix: the same tokens and log-probs as prefilling from scratch', async () => {
    const engine = await InferenceEngine.start(engineWith({ chunkSteps: 3 }));
    const unshared = await InferenceEngine.start(engineWith({ chunkSteps: 3, sharePrefixes: false }));
    try {
      expectSameTurns(await play(engine, undefined, grouped), groupedReference);
      expectSameTurns(await play(unshared, undefined, grouped), groupedReference);
      const stats = engine.stats;
      expect(stats.prefillTokens + stats.reusedTokens).toBe(groupedReferenceStats.prefillTokens);
      expect(unshared.stats.sharedTokens).toBe(0);
      // Every first turn but one starts from the system prompt at least; a group's others from its whole first prompt but the last token.
      expect(stats.sharedTokens).toBeGreaterThanOrEqual(2 * SYSTEM.length + 6 * (SYSTEM.length + 19));
      expect(stats.prefillTokens).toBeLessThan(unshared.stats.prefillTokens - stats.sharedTokens / 2);
    } finally {
      await Promise.all([engine.close(), unshared.close()]);
    }
  }, 120_000);

  it('drops the shared prefixes on an adapter swap like the episode caches: the same tokens as a fresh engine under the new adapter', async () => {
    const adapters: LoraWeights[] = [initLoraWeights(config, lora, { seed: 41, bStd: 0.5 }), initLoraWeights(config, lora, { seed: 42, bStd: 0.5 })];
    const swapAfter = (engine: InferenceEngine) => async (turn: number) => {
      if (turn < adapters.length) await engine.setLora(adapters[turn] as LoraWeights, turn + 1);
    };
    const plain = await InferenceEngine.start(staticEngineOptions);
    const sharing = await InferenceEngine.start(engineWith({ chunkSteps: 4 }));
    try {
      expectSameTurns(await play(sharing, swapAfter(sharing), grouped), await play(plain, swapAfter(plain), grouped));
      // One first prompt under adapter 2, then a swap to a third adapter: the next turn with that prompt starts from nothing.
      const prompt = grouped[0]!.observations[0] as number[];
      const turn = { promptIds: prompt, maxNewTokens: 6, seed: 5, temperature: 1 };
      await sharing.generate({ ...turn, cacheKey: 'before-swap' });
      const third = initLoraWeights(config, lora, { seed: 43, bStd: 0.5 });
      await Promise.all([sharing.setLora(third, 3), plain.setLora(third, 3)]);
      const before = sharing.stats.sharedTokens;
      const after = await sharing.generate({ ...turn, cacheKey: 'after-swap' });
      expect(sharing.stats.sharedTokens).toBe(before);
      // The next one shares the prefix computed under the new adapter.
      const again = await sharing.generate({ ...turn, seed: 6, cacheKey: 'after-swap-2' });
      expect(sharing.stats.sharedTokens).toBe(before + prompt.length - 1);
      expectSameTurns([[after, again]], [[await plain.generate(turn), await plain.generate({ ...turn, seed: 6 })]]);
    } finally {
      await Promise.all([plain.close(), sharing.close()]);
    }
  }, 120_000);

  it('evicts shared prefixes under the byte budget and stays exact', async () => {
    // tiny-qwen3: 768 B per token; room for about two 60-token prompts beside the active rows.
    const engine = await InferenceEngine.start(engineWith({ chunkSteps: 2 }, { kvCacheBytes: 768 * 200, maxBatchSize: 2 }));
    try {
      expectSameTurns(await play(engine, undefined, grouped), groupedReference);
      expect(engine.stats.evictions).toBeGreaterThan(0);
      expect(engine.stats.sharedTokens).toBeGreaterThan(0);
    } finally {
      await engine.close();
    }
  }, 120_000);
});
