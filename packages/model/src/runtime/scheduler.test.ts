import { describe, expect, it } from 'vitest';
import type { SchedulerPolicy } from './engine-options.ts';
import type { KeptCacheView } from './kv-store.ts';
import { decodes, decodeSteps, planAdmission, PREFILL_RUN_COST_TOKENS, prefillGroups, type SchedulerState, type WaitingTurnView } from './scheduler.ts';

/** The scheduler's decisions as plain data: a state in, a plan out, no generator and no timers. */
const policy: SchedulerPolicy = {
  batching: 'continuous',
  chunkSteps: 4,
  chunkStopShare: 1,
  reuseKv: true,
  sharePrefixes: true,
  maxBatchSize: 8,
  kvCacheBytes: 1 << 20,
  maxPrefillScoresBytes: 1 << 30,
  lengthBucketTokens: 4,
  batchWindowMs: 0,
  topK: 0,
  stopIds: [],
  numHeads: 1,
  bytesPerToken: 1,
};

const ids = (n: number, from = 1): number[] => Array.from({ length: n }, (_, i) => from + i);
const turn = (promptIds: readonly number[], extra: Partial<WaitingTurnView> = {}): WaitingTurnView => ({ promptIds, maxNewTokens: 4, epoch: 0, ...extra });
const state = (extra: Partial<SchedulerState>): SchedulerState => ({ waiting: [], active: [], epochs: { applied: 0, generation: 0, pending: [] }, kept: [], ...extra });
const episode = (key: string, cached: readonly number[]): KeptCacheView => ({ ref: { kind: 'episode', key }, ids: cached });
const prefix = (id: number, cached: readonly number[]): KeptCacheView => ({ ref: { kind: 'prefix', id }, ids: cached });
const admits = (plan: ReturnType<typeof planAdmission>) => plan.steps.flatMap((s) => (s.kind === 'admit' ? [s] : []));

describe('planAdmission: which waiting turns join', () => {
  it('stops when idle, admits in order under the batch size, and decodes a lone batch\'s first chunk in its prefill run', () => {
    expect(planAdmission(state({}), policy)).toMatchObject({ idle: true, steps: [] });
    const waiting = Array.from({ length: 10 }, (_, i) => turn(ids(4, 10 * i + 1)));
    const plan = planAdmission(state({ waiting, active: [{ promptLength: 4, maxNewTokens: 4, generatedTokens: 1, generation: 0 }] }), policy);
    expect(admits(plan)).toHaveLength(7);
    // Others are active or waiting: the prefill samples one token and the rows join the next decode chunk.
    expect(plan.prefill).toEqual({ groups: [[0, 1, 2, 3, 4, 5, 6]], steps: 1 });
    const alone = planAdmission(state({ waiting: [turn(ids(4), { maxNewTokens: 9 })] }), policy);
    expect(alone.prefill).toEqual({ groups: [[0]], steps: 4 });
  });

  it('holds a turn back when the active rows and it would pass the KV budget, evicting kept caches oldest first, the first turn always going', () => {
    // 1 byte per token: prompt + max new tokens reserved per row.
    const kept = [episode('old', ids(10)), prefix(0, ids(20, 100)), episode('new', ids(5, 50))];
    const waiting = Array.from({ length: 5 }, (_, i) => turn(ids(8, 200 + 10 * i)));
    const plan = planAdmission(state({ waiting, kept }), { ...policy, kvCacheBytes: 50 });
    // 12 bytes reserved per turn beside 35 kept: the 2nd, 3rd and 4th each evict the oldest kept cache; the 5th (60 > 50) waits.
    expect(admits(plan).map((a) => a.evict)).toEqual([[], [{ kind: 'episode', key: 'old' }], [{ kind: 'prefix', id: 0 }], [{ kind: 'episode', key: 'new' }]]);
    expect(plan.morePrefill).toBe(false);
    const big = planAdmission(state({ waiting: [turn(ids(100))], kept }), { ...policy, kvCacheBytes: 50 });
    expect(admits(big)).toEqual([expect.objectContaining({ evict: [] })]);
  });

  it('splits the prefill by the scores bound: the next turn waits for the next prefill run, before the decode chunk', () => {
    // 1 head: rows × min(C, widest) × (cached + widest) × 4 B; 16-token prompts: 1 × 16 × 16 × 4 = 1 KiB per row.
    const waiting = [turn(ids(16)), turn(ids(16, 50)), turn(ids(16, 90))];
    const plan = planAdmission(state({ waiting, active: [{ promptLength: 3, maxNewTokens: 9, generatedTokens: 1, generation: 0 }] }), { ...policy, maxPrefillScoresBytes: 2 * 1024 });
    expect(admits(plan)).toHaveLength(2);
    expect(plan.morePrefill).toBe(true);
    expect(decodes(policy, 1, plan.morePrefill)).toBe(false);
  });

  it('continues an episode\'s own cache when the prompt extends it, else drops it and starts from the longest shared prefix', () => {
    const system = ids(20, 100);
    const kept = [episode('a', [...system, 1, 2]), episode('b', [...system, 9]), prefix(0, system), prefix(1, [...system.slice(0, 17)])];
    const waiting = [turn([...system, 1, 2, 3], { cacheKey: 'a' }), turn([...system, 7, 7], { cacheKey: 'b' }), turn([...system.slice(0, 10), 5, 5])];
    const [a, b, c] = admits(planAdmission(state({ waiting, kept }), policy));
    expect(a?.claim).toEqual({ kind: 'own', length: 22 });
    // b's cache does not match its prompt: dropped; the system prompt (the longer prefix) serves it.
    expect(b).toMatchObject({ claim: { kind: 'prefix', id: 0, length: 20 }, dropStale: true });
    expect(a?.dropStale).toBe(false);
    // 10 shared tokens are fewer than MIN_SHARED_PREFIX_TOKENS: prefilled from scratch.
    expect(c).toMatchObject({ claim: { kind: 'none' }, dropStale: false });
    const stale = admits(planAdmission(state({ waiting: [turn(ids(3, 7), { cacheKey: 'b' })], kept }), policy));
    expect(stale[0]).toMatchObject({ claim: { kind: 'none' }, dropStale: true });
    // Without reuse nothing is claimed.
    expect(admits(planAdmission(state({ waiting: [waiting[0]!], kept }), { ...policy, reuseKv: false }))[0]).toMatchObject({ claim: { kind: 'none' }, dropStale: false });
  });

  it('holds back a first turn that shares more with a prompt prefilled in this run than with any kept prefix (a GRPO group\'s second turn)', () => {
    const question = ids(40, 100);
    const plan = planAdmission(state({ waiting: [turn([...question, 1]), turn([...question, 2])] }), policy);
    expect(admits(plan)).toHaveLength(1);
    expect(plan.morePrefill).toBe(true);
    // The next plan starts it from the first turn's prompt, kept after its prefill run.
    const next = planAdmission(state({ waiting: [turn([...question, 2])], kept: [prefix(3, [...question, 1])] }), policy);
    expect(admits(next)[0]?.claim).toEqual({ kind: 'prefix', id: 3, length: 40 });
    // Static batching never holds a turn back for that.
    expect(admits(planAdmission(state({ waiting: [turn([...question, 1]), turn([...question, 2])] }), { ...policy, batching: 'static' }))).toHaveLength(2);
  });
});

describe('planAdmission: adapter swaps', () => {
  it('applies a version-only swap once the turns before it are admitted: later turns join the same run', () => {
    const waiting = [turn(ids(4)), turn(ids(4, 9), { epoch: 1 })];
    const plan = planAdmission(state({ waiting, epochs: { applied: 0, generation: 0, pending: [{ epoch: 1, newTensors: false }] } }), policy);
    expect(plan.steps.map((s) => s.kind)).toEqual(['admit', 'swap', 'admit']);
    expect(plan.prefill?.groups).toEqual([[0, 1]]);
  });

  it('new tensors: later turns run under a new generation, never in a run with the earlier ones, and start from nothing kept', () => {
    const system = ids(20, 100);
    const waiting = [turn([...system, 1], { cacheKey: 'a' }), turn(ids(5, 200), { cacheKey: 'a', epoch: 1 }), turn(ids(3, 300), { epoch: 1 })];
    const kept = [episode('a', [...system, 1]), prefix(0, system)];
    const plan = planAdmission(state({ waiting, kept, epochs: { applied: 0, generation: 4, pending: [{ epoch: 1, newTensors: true }] } }), policy);
    expect(plan.steps.map((s) => (s.kind === 'admit' ? `${s.generation}:${s.claim.kind}` : s.kind))).toEqual(['4:prefix', 'swap', '5:none', '5:none']);
    // Generation 4's run, then generation 5's (narrowest first).
    expect(plan.prefill?.groups).toEqual([[0], [2, 1]]);
  });

  it('a swap waits while a turn submitted before it is still waiting (the batch is full)', () => {
    const waiting = [turn(ids(4)), turn(ids(4, 9), { epoch: 1 })];
    const plan = planAdmission(state({ waiting, epochs: { applied: 0, generation: 0, pending: [{ epoch: 1, newTensors: true }] } }), { ...policy, maxBatchSize: 1 });
    expect(plan.steps.map((s) => s.kind)).toEqual(['admit']);
    // Nothing waiting: every pending swap applies, and the loop stops.
    expect(planAdmission(state({ epochs: { applied: 0, generation: 0, pending: [{ epoch: 1, newTensors: true }, { epoch: 2, newTensors: false }] } }), policy)).toMatchObject({ idle: true, steps: [{ kind: 'swap' }, { kind: 'swap' }] });
  });
});

describe('static batching and decode chunks', () => {
  it('static batching admits only when nothing is active, decodes the batch to its longest turn in one run and never splits it', () => {
    const staticPolicy = { ...policy, batching: 'static' as const };
    const waiting = [turn(ids(100), { maxNewTokens: 3 }), turn(ids(2, 7), { maxNewTokens: 11 })];
    expect(admits(planAdmission(state({ waiting, active: [{ promptLength: 4, maxNewTokens: 9, generatedTokens: 1, generation: 0 }] }), staticPolicy))).toEqual([]);
    const plan = planAdmission(state({ waiting: [...waiting, turn(ids(3, 40))] }), staticPolicy);
    expect(plan.prefill).toEqual({ groups: [[0, 1, 2]], steps: 11 });
    expect(decodes(staticPolicy, 3, false)).toBe(false);
    // Continuous batching splits the same prefill by width.
    expect(planAdmission(state({ waiting }), { ...policy, lengthBucketTokens: 1 }).prefill?.groups).toEqual([[1], [0]]);
  });

  it('a decode chunk runs what the longest-running row still needs, at most chunkSteps (static: all of it)', () => {
    const rows = [
      { maxNewTokens: 10, generatedTokens: 1 },
      { maxNewTokens: 3, generatedTokens: 2 },
    ];
    expect(decodeSteps(rows, policy)).toBe(4);
    expect(decodeSteps(rows, { batching: 'static', chunkSteps: 4 })).toBe(9);
    expect(decodeSteps([{ maxNewTokens: 3, generatedTokens: 2 }], policy)).toBe(1);
  });
});

describe('prefillGroups: rows of a prefill run split by width', () => {
  const cost = (widths: readonly number[], groups: number[][], bucket: number): number =>
    groups.reduce((n, g) => n + PREFILL_RUN_COST_TOKENS + g.length * Math.max(...g.map((i) => Math.ceil((widths[i] as number) / bucket) * bucket)), 0);

  it('a long first turn among short continuations runs apart from them', () => {
    expect(prefillGroups([100, 20, 20, 20, 20, 20, 20, 20, 20], 32)).toEqual([[1, 2, 3, 4, 5, 6, 7, 8], [0]]);
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
});

describe('planAdmission: lanes in lockstep (deterministic engines)', () => {
  const lanes = (open: number, present: number): Pick<SchedulerState, 'lanes'> => ({ lanes: { open, present } });

  it('runs nothing while an open lane has no turn here, active rows included, and stops the loop meanwhile', () => {
    const waiting = Array.from({ length: 3 }, (_, i) => turn(ids(4, 10 * i + 1)));
    const active = [{ promptLength: 4, maxNewTokens: 8, generatedTokens: 2, generation: 0 }];
    expect(planAdmission(state({ waiting, ...lanes(4, 3) }), policy)).toMatchObject({ idle: true, steps: [], prefill: undefined });
    expect(planAdmission(state({ waiting, active, ...lanes(5, 4) }), policy)).toMatchObject({ idle: true, steps: [], prefill: undefined });
    // The missing lane's turn arrives (or the lane closes): the same turns, planned as without lanes.
    expect(planAdmission(state({ waiting, active, ...lanes(4, 4) }), policy)).toEqual(planAdmission(state({ waiting, active }), policy));
    expect(planAdmission(state({ waiting: [...waiting, turn(ids(6, 90))], ...lanes(4, 4) }), policy).prefill).toEqual({ groups: [[0, 1, 2, 3]], steps: 4 });
  });

  it('gives the same plan however many of the turns had arrived before: batches depend on the turns, not on timing', () => {
    const waiting = Array.from({ length: 5 }, (_, i) => turn(ids(3 + 5 * i, 10 * i + 1)));
    const expected = planAdmission(state({ waiting, ...lanes(5, 5) }), policy);
    for (let present = 0; present < 5; present++) expect(planAdmission(state({ waiting: waiting.slice(0, present), ...lanes(5, present) }), policy).steps).toEqual([]);
    expect(planAdmission(state({ waiting, ...lanes(5, 5) }), policy)).toEqual(expected);
  });

  it('still applies a pending adapter swap while it waits for a lane', () => {
    const plan = planAdmission(state({ waiting: [turn(ids(4), { epoch: 1 })], epochs: { applied: 0, generation: 0, pending: [{ epoch: 1, newTensors: true }] }, ...lanes(2, 1) }), policy);
    expect(plan).toMatchObject({ idle: true, steps: [{ kind: 'swap' }] });
  });
});
