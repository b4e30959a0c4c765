import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { presetConfig } from '../io/presets.ts';
import { randomWeights } from '../io/random-checkpoint.ts';
import { DEFAULT_KV_CACHE_MAX_BYTES } from '../memory/engine-memory-plan.ts';
import { EngineCore } from './engine-core.ts';
import { engineOptionsSchema, schedulerPolicy, type ExperimentalEngineOptions } from './engine-options.ts';
import { Generator, type RowInput, type RunRowsOptions } from './generator.ts';

/**
 * The engine core through the real generator on a tiny random checkpoint: the runs its plans make
 * (recorded by wrapping `runRows`) and the counters it keeps. Exactness of the tokens against the
 * static engine and against each turn alone is in kv-reuse.test.ts.
 */
const config = presetConfig('tiny-qwen2');
let generator: Generator;
/** Each run's `minRunning`, new tokens per row and each row's first id; `onRun` is called before each run. */
let runs: { minRunning: number | undefined; fed: number[]; firstIds: number[] }[] = [];
let onRun: ((run: number) => void) | undefined;

beforeAll(async () => {
  generator = await Generator.create(config, randomWeights(config, { seed: 21, initStd: 0.15 }));
  const runRows = generator.runRows.bind(generator);
  generator.runRows = (rows: readonly RowInput[], options: RunRowsOptions) => {
    runs.push({ minRunning: options.minRunning, fed: rows.map((r) => r.inputIds.length), firstIds: rows.map((r) => r.inputIds[0] as number) });
    onRun?.(runs.length);
    return runRows(rows, options);
  };
}, 60_000);
afterAll(() => generator.close());

function core(options: ExperimentalEngineOptions & { maxBatchSize?: number }): EngineCore {
  const { maxBatchSize, ...knobs } = options;
  runs = [];
  onRun = undefined;
  // A window far longer than any test: a batch starts when it is full (maxBatchSize turns), never by the clock.
  const parsed = engineOptionsSchema.parse({ modelDir: 'unused', stopIds: [], ...(maxBatchSize === undefined ? {} : { maxBatchSize }), experimental: { batchWindowMs: 60_000, ...knobs } });
  return new EngineCore(generator, schedulerPolicy({ ...parsed, kvCacheBytes: DEFAULT_KV_CACHE_MAX_BYTES }, config));
}

const prompt = (n: number, from: number): number[] => Array.from({ length: n }, (_, i) => (from + i * 7) % config.vocabSize);

describe('EngineCore: the runs it makes', () => {
  it('asks each continuous run to end once chunkStopShare of its rows (at least one) has stopped; static runs never', async () => {
    for (const [options, want] of [
      [{ chunkStopShare: 0.25 }, 8 - 2],
      [{ chunkStopShare: 0.01 }, 8 - 1],
      [{ chunkStopShare: 1 }, 0],
      [{ batching: 'static', reuseKv: false }, undefined],
    ] as const) {
      const c = core({ maxBatchSize: 8, chunkSteps: 4, ...options });
      await Promise.all(Array.from({ length: 8 }, (_, i) => c.submit({ promptIds: prompt(4, i), maxNewTokens: 2, seed: i })));
      // One run: 8 turns admitted together, alone, decoding their whole budget.
      expect({ options, runs: runs.map((r) => r.minRunning) }).toEqual({ options, runs: [want] });
    }
  }, 60_000);

  it('runs a long prompt and short ones admitted together as separate prefill runs, narrowest first', async () => {
    const c = core({ maxBatchSize: 5, lengthBucketTokens: 1 });
    await Promise.all([c.submit({ promptIds: prompt(200, 3), maxNewTokens: 1 }), ...Array.from({ length: 4 }, (_, i) => c.submit({ promptIds: prompt(4, 10 + i), maxNewTokens: 1, seed: i }))]);
    expect(runs.map((r) => r.fed)).toEqual([[4, 4, 4, 4], [200]]);
  }, 60_000);

  it('counts the prefill runs of turns that join while others decode, the rows they stall, and an episode\'s time away', async () => {
    const c = core({ maxBatchSize: 2, chunkSteps: 2, chunkStopShare: 1, batchWindowMs: 0 });
    let joined: Promise<unknown> | undefined;
    // Turn b arrives while a decodes (before a's third run): its prefill run stalls a's row.
    onRun = (run) => {
      if (run === 3) joined = c.submit({ promptIds: prompt(5, 40), maxNewTokens: 2, seed: 2, cacheKey: 'b' });
    };
    const first = await c.submit({ promptIds: prompt(6, 1), maxNewTokens: 12, seed: 1, cacheKey: 'a' });
    await joined;
    const { admitMs, stalledRowMs, busyMs, returns } = c.stats;
    expect(admitMs).toBeGreaterThan(0);
    expect(admitMs).toBeLessThan(busyMs);
    expect(stalledRowMs).toBeGreaterThan(0);
    expect(returns).toBe(0);
    // a's next turn continues its cache: one return, its prompt's appended tokens the only ones fed.
    const before = runs.length;
    await c.submit({ promptIds: [...prompt(6, 1), ...first.tokens, 9, 9], maxNewTokens: 2, seed: 3, cacheKey: 'a' });
    expect(c.stats.returns).toBe(1);
    expect(c.stats.awayMs).toBeGreaterThanOrEqual(0);
    expect(runs[before]?.fed).toEqual([3]);
  }, 60_000);
});

describe('EngineCore: lanes in lockstep', () => {
  const flush = async (): Promise<void> => {
    for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve));
  };

  it('runs nothing while an open lane has no turn, then the turns in episode order; a closed lane is not waited for', async () => {
    const c = core({ maxBatchSize: 8, batchWindowMs: 0 });
    for (const lane of [0, 1, 2]) c.openLane(lane);
    // Same-length prompts told apart by their first id (the episode's order key). Lanes 2 and 0
    // submit, in that order; lane 1 is still stepping its environment.
    const submit = (lane: number, order: number) => c.submit({ promptIds: [order, ...prompt(4, order)], maxNewTokens: 1, seed: order }, { id: lane, order });
    const first = [submit(2, 7), submit(0, 3)];
    await flush();
    expect(runs).toEqual([]);
    // A refused turn does not count as the lane's.
    await expect(c.submit({ promptIds: [config.vocabSize + 5], maxNewTokens: 1 }, { id: 1, order: 5 })).rejects.toThrow();
    await flush();
    expect(runs).toEqual([]);
    await Promise.all([...first, submit(1, 5)]);
    expect(runs.map((r) => r.firstIds)).toEqual([[3, 5, 7]]);
    // Lane 1 closes: lanes 0 and 2 run on without it.
    c.closeLane(1);
    await Promise.all([submit(2, 7), submit(0, 3)]);
    expect(runs.map((r) => r.firstIds)).toEqual([[3, 5, 7], [3, 7]]);
  }, 60_000);
});
