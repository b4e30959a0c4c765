import { describe, expect, it } from 'vitest';
import type { ModelConfig } from '../io/config.ts';
import type { LoraWeights } from '../graphs/lora.ts';
import type { Generator, RowInput, RowOutput, RunRowsOptions } from './generator.ts';
import { PREFILL_RUN_COST_TOKENS, prefillGroups, TurnScheduler, type TurnSchedulerOptions } from './turn-scheduler.ts';

/**
 * The scheduler's batching decisions, against a stand-in generator whose runs take a fixed time and
 * sample a fixed token: which turns share a run, and when a turn waits. Each turn is told apart by
 * its temperature, which the stand-in records per run. Exactness of the tokens is tested against the
 * real generator in kv-reuse.test.ts.
 */
const config = { numLayers: 1, numKvHeads: 1, headDim: 1, numHeads: 1, vocabSize: 32 } as ModelConfig;

class RecordingGenerator {
  readonly config = config;
  /** Temperatures of the rows of each run, in order. */
  readonly runs: number[][] = [];
  /** The adapter of each run, and the new tokens fed per row. */
  readonly adapters: (LoraWeights | undefined)[] = [];
  readonly inputs: number[][] = [];
  /** Each run's `minRunning`. */
  readonly minRunning: (number | undefined)[] = [];
  constructor(readonly runMs: number) {}
  async runRows(rows: readonly RowInput[], options: RunRowsOptions): Promise<RowOutput[]> {
    this.runs.push(rows.map((r) => r.temperature ?? 1));
    this.adapters.push(options.lora);
    this.inputs.push(rows.map((r) => r.inputIds.length));
    this.minRunning.push(options.minRunning);
    await new Promise((resolve) => setTimeout(resolve, this.runMs));
    return rows.map((r) => {
      const length = (r.cache?.length ?? 0) + r.inputIds.length + options.steps - 1;
      const cache = { length, keys: [new Float32Array(length)], values: [new Float32Array(length)] };
      return { tokens: Array.from({ length: options.steps }, () => 5), logprobs: Array.from({ length: options.steps }, () => -1), sampleLogprobs: Array.from({ length: options.steps }, () => -1), stopped: false, steps: options.steps, cache };
    });
  }
}

function scheduler(generator: RecordingGenerator, options: Partial<TurnSchedulerOptions> = {}): TurnScheduler {
  return new TurnScheduler(generator as unknown as Generator, {
    reuseKv: true,
    sharePrefixes: false,
    chunkSteps: 2,
    maxBatchSize: 8,
    kvCacheBytes: 1 << 20,
    maxPrefillScoresBytes: 1 << 30,
    lengthBucketTokens: 4,
    batchWindowMs: 0,
    returnWaitMs: 0,
    topK: 0,
    stopIds: [],
    ...options,
  });
}

const prompt = [1, 2, 3, 4];

describe('TurnScheduler: adapter swaps', () => {
  it('a version-only swap does not hold back later turns: they join the rows still decoding and carry the new version', async () => {
    const generator = new RecordingGenerator(5);
    const s = scheduler(generator);
    const a = s.submit({ promptIds: prompt, maxNewTokens: 12, seed: 1, temperature: 1.01, cacheKey: 'a' });
    await new Promise((resolve) => setTimeout(resolve, 15));
    const swapped = s.setLora(null, 1);
    const b = s.submit({ promptIds: prompt, maxNewTokens: 2, seed: 2, temperature: 1.02, cacheKey: 'b' });
    const order: string[] = [];
    const [ra, rb] = await Promise.all([a.then((r) => (order.push('a'), r)), b.then((r) => (order.push('b'), r)), swapped]);
    expect(rb.policyVersion).toBe(1);
    expect(ra.policyVersion).toBe(0);
    expect(order).toEqual(['b', 'a']);
    expect(generator.runs.some((run) => run.includes(1.01) && run.includes(1.02))).toBe(true);
  });

  it('new adapter tensors apply at once for later turns: the earlier turn finishes under the old adapter, never in a run with the new one', async () => {
    const generator = new RecordingGenerator(5);
    const s = scheduler(generator);
    const a = s.submit({ promptIds: prompt, maxNewTokens: 12, seed: 1, temperature: 1.01, cacheKey: 'a' });
    await new Promise((resolve) => setTimeout(resolve, 15));
    const next = {} as LoraWeights;
    const swapped = s.setLora(next, 1);
    const b = s.submit({ promptIds: prompt, maxNewTokens: 2, seed: 2, temperature: 1.02, cacheKey: 'b' });
    const order: string[] = [];
    const [ra, rb] = await Promise.all([a.then((r) => (order.push('a'), r)), b.then((r) => (order.push('b'), r)), swapped]);
    expect([ra.policyVersion, rb.policyVersion]).toEqual([0, 1]);
    expect(order).toEqual(['b', 'a']);
    expect(generator.runs.some((run) => run.includes(1.01) && run.includes(1.02))).toBe(false);
    generator.runs.forEach((run, i) => {
      if (run.includes(1.01)) expect(generator.adapters[i]).toBeUndefined();
      if (run.includes(1.02)) expect(generator.adapters[i]).toBe(next);
    });
  });

  it('after new tensors the old adapter\'s rows park nothing: the episode\'s next turn re-prefills its whole prompt', async () => {
    const generator = new RecordingGenerator(5);
    const s = scheduler(generator);
    const a = s.submit({ promptIds: prompt, maxNewTokens: 12, seed: 1, temperature: 1.01, cacheKey: 'a' });
    await new Promise((resolve) => setTimeout(resolve, 15));
    await s.setLora({} as LoraWeights, 1);
    const first = await a;
    const before = generator.inputs.length;
    await s.submit({ promptIds: [...prompt, ...first.tokens, 6], maxNewTokens: 2, seed: 3, temperature: 1.03, cacheKey: 'a' });
    expect(generator.inputs[before]).toEqual([prompt.length + first.tokens.length + 1]);
  });
});

describe('TurnScheduler: waiting for returning episodes', () => {
  /**
   * Episode x's first turn ends early; its next turn comes back 5 ms later (its environment step),
   * while episode y decodes on. Runs take 200 ms, so a wait bounded by half of that covers the return.
   */
  async function play(returnWaitMs: number): Promise<number[][]> {
    const generator = new RecordingGenerator(200);
    const s = scheduler(generator, { returnWaitMs });
    const y = s.submit({ promptIds: prompt, maxNewTokens: 12, seed: 1, temperature: 1.2, cacheKey: 'y' });
    const x1 = await s.submit({ promptIds: [9, 9, 9, 9], maxNewTokens: 2, seed: 2, temperature: 1.1, cacheKey: 'x' });
    await new Promise((resolve) => setTimeout(resolve, 5));
    const x2 = s.submit({ promptIds: [9, 9, 9, 9, ...x1.tokens, 7, 7], maxNewTokens: 2, seed: 3, temperature: 1.3, cacheKey: 'x' });
    await Promise.all([y, x2]);
    return generator.runs;
  }

  /** Runs of y alone between x's first turn's last run and its second turn's first. */
  function aloneBetween(runs: number[][]): number {
    const lastX1 = runs.findLastIndex((run) => run.includes(1.1));
    const firstX2 = runs.findIndex((run) => run.includes(1.3));
    return runs.slice(lastX1 + 1, firstX2).filter((run) => run.length === 1 && run[0] === 1.2).length;
  }

  it('with returnWaitMs the next chunk waits for the episode whose turn just ended', async () => {
    expect(aloneBetween(await play(1000))).toBe(0);
  });

  it('without it the next chunk starts at once and the returning turn waits a whole chunk', async () => {
    expect(aloneBetween(await play(0))).toBe(1);
  });
});

describe('TurnScheduler: where the turns spend their time (stats)', () => {
  it('counts rows × run time, the wait before a prefill run and the time an episode spent away', async () => {
    const generator = new RecordingGenerator(100);
    const s = scheduler(generator);
    // y decodes in 100 ms runs; x's first turn arrives while y's first run is running and waits for it.
    const y = s.submit({ promptIds: prompt, maxNewTokens: 8, seed: 1, temperature: 1.2, cacheKey: 'y' });
    await new Promise((resolve) => setTimeout(resolve, 10));
    const x1 = await s.submit({ promptIds: [9, 9, 9, 9], maxNewTokens: 1, seed: 2, temperature: 1.1, cacheKey: 'x' });
    const queuedBefore = s.stats.queueMs;
    await new Promise((resolve) => setTimeout(resolve, 30));
    await Promise.all([y, s.submit({ promptIds: [9, 9, 9, 9, ...x1.tokens, 7], maxNewTokens: 1, seed: 3, temperature: 1.3, cacheKey: 'x' })]);
    const { rowMs, rows, queueMs, awayMs, returns, busyMs } = s.stats;
    // Every run lasts at least its 100 ms: rows × 100 ms at least, and no more than all rows for the whole busy time.
    expect(rowMs).toBeGreaterThanOrEqual(rows * 99);
    expect(rowMs).toBeLessThanOrEqual(rows * busyMs);
    // x's first turn arrived ~10 ms into y's first run of 100 ms and waited for its end.
    expect(queuedBefore).toBeGreaterThanOrEqual(80);
    expect(queueMs).toBeGreaterThanOrEqual(queuedBefore);
    // One episode came back (x; y's turn was its only one), after its 30 ms away.
    expect(returns).toBe(1);
    expect(awayMs).toBeGreaterThanOrEqual(29);
  });
});

describe('TurnScheduler: runs that end once enough rows stop', () => {
  it('asks each continuous run to stop once chunkStopShare of its rows (at least one) has stopped; the static engine never', async () => {
    for (const [options, want] of [
      [{ chunkStopShare: 0.25 }, [8 - 2]],
      [{ chunkStopShare: 0.01 }, [8 - 1]],
      [{}, [0]],
      [{ chunkSteps: Infinity, reuseKv: false }, [undefined]],
    ] as const) {
      const generator = new RecordingGenerator(1);
      const s = scheduler(generator, { batchWindowMs: 5, ...options });
      await Promise.all(Array.from({ length: 8 }, (_, i) => s.submit({ promptIds: prompt, maxNewTokens: 2, seed: i, temperature: 1 + i / 100 })));
      // One run: 8 turns admitted together, alone, decoding their whole budget.
      expect({ options, minRunning: generator.minRunning }).toEqual({ options, minRunning: want });
    }
    expect(() => scheduler(new RecordingGenerator(1), { chunkStopShare: 0 })).toThrow(/chunkStopShare/);
  });
});

describe('prefillGroups: rows of a prefill run split by width', () => {
  const cost = (widths: readonly number[], groups: number[][], bucket: number): number =>
    groups.reduce((n, g) => n + PREFILL_RUN_COST_TOKENS + g.length * Math.max(...g.map((i) => Math.ceil((widths[i] as number) / bucket) * bucket)), 0);

  it('a long first turn among short continuations runs apart from them', () => {
    const widths = [100, 20, 20, 20, 20, 20, 20, 20, 20];
    expect(prefillGroups(widths, 32)).toEqual([[1, 2, 3, 4, 5, 6, 7, 8], [0]]);
  });

  it('rows of one width stay one run in their order (a decode chunk is never split)', () => {
    expect(prefillGroups([1, 1, 1, 1, 1], 32)).toEqual([[0, 1, 2, 3, 4]]);
    expect(prefillGroups([17, 30, 2], 32)).toEqual([[0, 1, 2]]);
  });

  it('does not split when the saved padding is worth less than a run', () => {
    // One run: 64 + 2 × 64 = 192 positions; two: 64 + 32 + 64 + 64 = 224.
    expect(prefillGroups([30, 33], 32)).toEqual([[0, 1]]);
  });

  it('every row lands in exactly one group, never at a higher cost than one run', () => {
    let seed = 7;
    const next = (): number => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31);
    for (let trial = 0; trial < 200; trial++) {
      const widths = Array.from({ length: 1 + (next() % 40) }, () => 1 + (next() % 300));
      const bucket = [1, 8, 32][next() % 3] as number;
      const groups = prefillGroups(widths, bucket);
      expect(groups.flat().sort((a, b) => a - b)).toEqual(widths.map((_, i) => i));
      expect(cost(widths, groups, bucket)).toBeLessThanOrEqual(cost(widths, [widths.map((_, i) => i)], bucket));
    }
  });

  it('the scheduler runs a long prompt and short ones admitted together as separate prefill runs', async () => {
    const generator = new RecordingGenerator(5);
    const s = scheduler(generator, { lengthBucketTokens: 1, maxBatchSize: 8, batchWindowMs: 20 });
    const long = Array.from({ length: 400 }, (_, i) => 1 + (i % 30));
    const turns = [s.submit({ promptIds: long, maxNewTokens: 1, seed: 1, temperature: 1.5 })];
    for (let i = 0; i < 4; i++) turns.push(s.submit({ promptIds: prompt, maxNewTokens: 1, seed: 2 + i, temperature: 1.1 + i / 100 }));
    await Promise.all(turns);
    expect(generator.inputs).toEqual([[4, 4, 4, 4], [400]]);
  });
});

describe('TurnScheduler: where the time goes', () => {
  it('counts the prefill runs of admitted turns and the decoding rows they stall', async () => {
    const generator = new RecordingGenerator(20);
    const s = scheduler(generator, { batchWindowMs: 5 });
    // Two episodes start together (one run within the batch window, nothing decoding yet), then decode in chunks of 2 steps.
    const a1 = s.submit({ promptIds: prompt, maxNewTokens: 12, seed: 1, temperature: 1.01, cacheKey: 'a1' });
    const a2 = s.submit({ promptIds: prompt, maxNewTokens: 12, seed: 2, temperature: 1.02, cacheKey: 'a2' });
    await new Promise((resolve) => setTimeout(resolve, 30));
    // A third joins while both decode: its prefill run stalls two rows.
    const b = s.submit({ promptIds: [9, 9, 9, 9], maxNewTokens: 2, seed: 3, temperature: 1.03, cacheKey: 'b' });
    await Promise.all([a1, a2, b]);
    const { admitMs, stalledRowMs, busyMs } = s.stats;
    // (a1, a2) started in one run, b in a prefill run of its own while a1 and a2 were decoding.
    expect(generator.runs[0]).toEqual([1.01, 1.02]);
    expect(generator.runs.filter((run) => run.includes(1.03) && !run.includes(1.01))).toHaveLength(1);
    expect(admitMs).toBeGreaterThanOrEqual(2 * 19);
    expect(admitMs).toBeLessThan(busyMs);
    // Two rows sat out b's prefill run (≥ 20 ms each) and nothing else stalled them.
    expect(stalledRowMs).toBeGreaterThanOrEqual(2 * 19);
    expect(stalledRowMs).toBeLessThan(2 * admitMs);
  });
});
