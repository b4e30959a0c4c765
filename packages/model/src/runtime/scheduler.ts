import { maxOf } from '@sqlenv/shared';
import { DEFAULT_PREFILL_CHUNK_TOKENS } from '../graphs/generation-graph.ts';
import type { PendingSwap } from './adapter-epochs.ts';
import type { SchedulerPolicy } from './engine-options.ts';
import { commonPrefixLength } from './kv-cache.ts';
import { evictionsFor, type CacheRef, type KeptCacheView } from './kv-store.ts';

/**
 * The scheduling step, a pure function of the engine's state: which waiting turns are admitted (in
 * order, under the batch size, the KV budget and the prefill scores bound), what cache each starts
 * from, which kept caches are evicted for them, where pending adapter swaps apply, how the admitted
 * turns' prefill is split into runs, and how many steps a run decodes. The engine core executes the
 * plan (engine-core.ts).
 */

/** Fewest tokens a turn takes from a shared prefix (shorter ones are not worth a cache copy), and the least a turn is held back for. */
export const MIN_SHARED_PREFIX_TOKENS = 16;

/**
 * What one more prefill run costs beyond its token positions, in positions: on the 2-core development
 * machine for sqlenv-tiny against 300-token caches a run costs ~2.5 ms plus ~50 µs per position (rows ×
 * padded width), so a run is worth ~50 positions (docs/inference.md, "Prefill runs"). For larger models
 * a position costs more and the fixed part less, so this splits less than it could.
 */
export const PREFILL_RUN_COST_TOKENS = 64;

/** A turn waiting to be admitted. */
export interface WaitingTurnView {
  promptIds: readonly number[];
  maxNewTokens: number;
  cacheKey?: string | undefined;
  /** Adapter swaps requested before it arrived. */
  epoch: number;
}

/** A row being decoded. */
export interface ActiveRowView {
  promptLength: number;
  maxNewTokens: number;
  generatedTokens: number;
  /** The adapter generation it runs under (rows of two never share a run). */
  generation: number;
}

export interface SchedulerState {
  /** In arrival order. */
  waiting: readonly WaitingTurnView[];
  active: readonly ActiveRowView[];
  /** The applied adapter epoch and generation, and the swaps not applied yet, oldest first. */
  epochs: { applied: number; generation: number; pending: readonly PendingSwap[] };
  /** The KV store's kept caches, oldest first. */
  kept: readonly KeptCacheView[];
  /**
   * Deterministic engines: the evaluation lanes open on this replica and how many of them have a turn
   * here (waiting or active). A lane whose turn has finished is stepping its environment; its next
   * turn (or its close) is waited for.
   */
  lanes?: { open: number; present: number } | undefined;
}

/** What an admitted turn starts from: nothing, its episode's cache, or the first `length` tokens of a shared prefix. */
export type Claim = { kind: 'none' } | { kind: 'own'; length: number } | { kind: 'prefix'; id: number; length: number };

/**
 * In order: apply the next pending swap, or admit the next waiting turn under adapter `generation`,
 * starting from `claim` (`dropStale`: its episode's cache does not match its prompt and goes), after
 * evicting `evict`.
 */
export type PlanStep = { kind: 'swap' } | { kind: 'admit'; claim: Claim; dropStale: boolean; generation: number; evict: CacheRef[] };

export interface AdmissionPlan {
  steps: PlanStep[];
  /** Nothing waiting or active once the swaps are applied, or a lane's next turn is awaited: the loop stops (the next message restarts it). */
  idle: boolean;
  /** Runs over the admitted turns (indices in admission order) and their decode steps; none when no turn is admitted. */
  prefill: { groups: number[][]; steps: number } | undefined;
  /** The next waiting turn was held back for the next prefill run (scores bound, or a prefix it will share): prefill before decoding. */
  morePrefill: boolean;
}

/** Decode steps of the next run over `rows`: what the longest-running still needs, at most a chunk (static: all of it). */
export function decodeSteps(rows: readonly Pick<ActiveRowView, 'maxNewTokens' | 'generatedTokens'>[], policy: Pick<SchedulerPolicy, 'batching' | 'chunkSteps'>): number {
  const remaining = maxOf(rows.map((r) => r.maxNewTokens - r.generatedTokens));
  return Math.max(1, policy.batching === 'static' ? remaining : Math.min(policy.chunkSteps, remaining));
}

/** Whether the active rows decode a chunk after the prefill runs: continuous batching, unless waiting turns go first. */
export function decodes(policy: Pick<SchedulerPolicy, 'batching'>, activeRows: number, morePrefill: boolean): boolean {
  return policy.batching === 'continuous' && !morePrefill && activeRows > 0;
}

/** Indices of `generations` grouped by value, in order of first appearance. */
export function byGeneration(generations: readonly number[]): number[][] {
  const groups = new Map<number, number[]>();
  generations.forEach((g, i) => {
    const group = groups.get(g);
    if (group === undefined) groups.set(g, [i]);
    else group.push(i);
  });
  return [...groups.values()];
}

/**
 * Rows of one prefill run grouped into runs that cost the least: each run pads its rows to its widest
 * (rounded up to `bucket`), so a run of one 100-token first turn and eight 20-token continuations
 * computes 9 × 128 positions where two runs compute 128 + 8 × 32. Rows sorted by width, each group a
 * contiguous range, chosen by dynamic programming over Σ (rows × width + runCost). Returns the groups
 * as indices into `widths`, narrowest first; one group when splitting does not pay.
 */
export function prefillGroups(widths: readonly number[], bucket: number, runCost: number = PREFILL_RUN_COST_TOKENS): number[][] {
  const order = widths.map((w, i) => ({ w: Math.ceil(w / bucket) * bucket, i })).sort((a, b) => a.w - b.w || a.i - b.i);
  const n = order.length;
  // best[j]: least cost of the first j rows (in width order); cut[j]: where its last group starts.
  const best = new Array<number>(n + 1).fill(Number.POSITIVE_INFINITY);
  const cut = new Array<number>(n + 1).fill(0);
  best[0] = 0;
  for (let j = 1; j <= n; j++) {
    const width = (order[j - 1] as { w: number }).w; // the widest of any group ending at j
    for (let i = 0; i < j; i++) {
      const cost = (best[i] as number) + runCost + (j - i) * width;
      if (cost < (best[j] as number)) {
        best[j] = cost;
        cut[j] = i;
      }
    }
  }
  const groups: number[][] = [];
  for (let j = n; j > 0; j = cut[j] as number) groups.unshift(order.slice(cut[j], j).map((o) => o.i));
  return groups;
}

interface Admitted {
  turn: WaitingTurnView;
  claim: Claim;
  cachedLength: number;
  generation: number;
}

interface Claimed {
  claim: Claim;
  cachedLength: number;
  dropStale: boolean;
}

/** The cache a turn would start from in `kept` (which it updates: an episode's cache is taken, a stale one dropped). */
function claimFor(turn: WaitingTurnView, kept: KeptCacheView[], policy: SchedulerPolicy): Claimed {
  const none: Claimed = { claim: { kind: 'none' }, cachedLength: 0, dropStale: false };
  if (!policy.reuseKv) return none;
  const { promptIds, cacheKey } = turn;
  const at = cacheKey === undefined ? -1 : kept.findIndex((k) => k.ref.kind === 'episode' && k.ref.key === cacheKey);
  const own = kept[at];
  if (own !== undefined) {
    kept.splice(at, 1);
    if (own.ids.length < promptIds.length && own.ids.every((id, i) => promptIds[i] === id)) return { claim: { kind: 'own', length: own.ids.length }, cachedLength: own.ids.length, dropStale: false };
  }
  // A prompt that does not extend the cached ids (a truncated or rewritten context) re-prefills; the stale cache is dropped.
  const stale: Claimed = { ...none, dropStale: own !== undefined };
  if (!policy.sharePrefixes) return stale;
  // At least the prompt's last token is fed: the run samples from its position. Ties: the least recently used.
  let best: { id: number; length: number } | undefined;
  for (const k of kept) {
    if (k.ref.kind !== 'prefix') continue;
    const length = Math.min(promptIds.length - 1, commonPrefixLength(promptIds, k.ids));
    if (length > (best?.length ?? 0)) best = { id: k.ref.id, length };
  }
  if (best === undefined || best.length < MIN_SHARED_PREFIX_TOKENS) return stale;
  return { claim: { kind: 'prefix', id: best.id, length: best.length }, cachedLength: best.length, dropStale: stale.dropStale };
}

/** A turn whose prompt cache is kept as a shared prefix after its prefill run: it had no cache of its own. */
export function sharesPrompt(policy: Pick<SchedulerPolicy, 'reuseKv' | 'sharePrefixes'>, ownCache: boolean, promptLength: number): boolean {
  return policy.reuseKv && policy.sharePrefixes && !ownCache && promptLength > MIN_SHARED_PREFIX_TOKENS;
}

/** Whether the prompt of a turn admitted to this run would give `turn` MIN_SHARED_PREFIX_TOKENS more than it starts from. */
function sharesMore(turn: WaitingTurnView, claim: Claim, cachedLength: number, admitted: readonly Admitted[], policy: SchedulerPolicy): boolean {
  if (policy.batching === 'static' || !policy.reuseKv || !policy.sharePrefixes || claim.kind === 'own') return false;
  const prompt = turn.promptIds;
  return admitted.some(
    (other) => sharesPrompt(policy, other.claim.kind === 'own', other.turn.promptIds.length) && Math.min(prompt.length - 1, commonPrefixLength(prompt, other.turn.promptIds)) >= cachedLength + MIN_SHARED_PREFIX_TOKENS,
  );
}

/** Whether the loop may go on as far as lanes go: none is open here, or every open one has its turn here. */
export function lanesPresent(state: Pick<SchedulerState, 'lanes'>): boolean {
  return state.lanes === undefined || state.lanes.present >= state.lanes.open;
}

/** Bytes a turn may grow to: its prompt plus its whole token budget. */
function reservedBytes(promptLength: number, maxNewTokens: number, policy: SchedulerPolicy): number {
  return (promptLength + maxNewTokens) * policy.bytesPerToken;
}

/**
 * The admission step. Swaps apply once every turn submitted before them is admitted; a swap with new
 * tensors empties the store (its caches are the old adapter's) and later turns run under a new
 * generation. Static batching admits only when nothing is active.
 */
export function planAdmission(state: SchedulerState, policy: SchedulerPolicy): AdmissionPlan {
  const kept = [...state.kept];
  const steps: PlanStep[] = [];
  let { applied, generation } = state.epochs;
  let swaps = 0;
  const applySwaps = (next: WaitingTurnView | undefined): void => {
    for (let swap = state.epochs.pending[swaps]; swap !== undefined && !(next !== undefined && next.epoch < swap.epoch); swap = state.epochs.pending[swaps]) {
      steps.push({ kind: 'swap' });
      swaps++;
      applied = swap.epoch;
      if (swap.newTensors) {
        generation++;
        kept.length = 0;
      }
    }
  };
  applySwaps(state.waiting[0]);
  const nothing = { steps, prefill: undefined, morePrefill: false };
  if (state.active.length === 0 && state.waiting.length === 0) return { ...nothing, idle: true };
  // Lockstep: nothing runs until every open lane has its turn here, so no batch depends on when an environment step ended.
  if (!lanesPresent(state)) return { ...nothing, idle: true };
  if (policy.batching === 'static' && state.active.length > 0) return { ...nothing, idle: false };
  const admitted: Admitted[] = [];
  let reserved = state.active.reduce((n, r) => n + reservedBytes(r.promptLength, r.maxNewTokens, policy), 0);
  let widest = 0;
  let longest = 0;
  let morePrefill = false;
  for (const turn of state.waiting) {
    if (state.active.length + admitted.length >= policy.maxBatchSize) break;
    // Every earlier turn is admitted: a swap it waits for can apply now.
    if (turn.epoch !== applied) applySwaps(turn);
    if (turn.epoch !== applied) break;
    const { claim, cachedLength, dropStale } = claimFor(turn, kept, policy);
    // Shares more with a prompt prefilled in this run than with any kept prefix: start it from that prompt next run.
    if (sharesMore(turn, claim, cachedLength, admitted, policy)) {
      morePrefill = true;
      break;
    }
    const fresh = turn.promptIds.length - cachedLength;
    const nextWidest = Math.max(widest, Math.ceil(fresh / policy.lengthBucketTokens) * policy.lengthBucketTokens);
    const nextLongest = Math.max(longest, cachedLength);
    // The graph prefills in chunks of C new tokens: a run's widest scores are (rows, heads, min(C, new), cached + new).
    const scores = (admitted.length + 1) * policy.numHeads * Math.min(DEFAULT_PREFILL_CHUNK_TOKENS, nextWidest) * (nextLongest + nextWidest) * 4;
    if (admitted.length > 0 && scores > policy.maxPrefillScoresBytes) {
      morePrefill = true;
      break;
    }
    const bytes = reservedBytes(turn.promptIds.length, turn.maxNewTokens, policy);
    const first = state.active.length === 0 && admitted.length === 0;
    // The budget covers everything; the first turn runs even when it alone does not fit.
    const evict = evictionsFor(kept, reserved + bytes, policy.kvCacheBytes, policy.bytesPerToken);
    if (evict === undefined && !first) break;
    for (const ref of evict ?? []) kept.splice(kept.findIndex((k) => k.ref === ref), 1);
    if (claim.kind === 'prefix') {
      const at = kept.findIndex((k) => k.ref.kind === 'prefix' && k.ref.id === claim.id);
      kept.push(...kept.splice(at, 1));
    }
    steps.push({ kind: 'admit', claim, dropStale, generation, evict: evict ?? [] });
    admitted.push({ turn, claim, cachedLength, generation });
    reserved += bytes;
    widest = nextWidest;
    longest = nextLongest;
  }
  if (admitted.length === 0) return { steps, idle: false, prefill: undefined, morePrefill };
  return { steps, idle: false, prefill: prefillPlan(state, admitted, policy), morePrefill };
}

/**
 * Runs over the admitted turns: one per adapter generation, split by width under continuous batching.
 * Static batching decodes the batch to its end in that run; continuous batching samples one token and
 * the rows join the next decode chunk, unless nothing else is active or waiting: then the prefill run
 * decodes the first chunk itself.
 */
function prefillPlan(state: SchedulerState, admitted: readonly Admitted[], policy: SchedulerPolicy): { groups: number[][]; steps: number } {
  const alone = state.active.length === 0 && state.waiting.length === admitted.length;
  const rows = admitted.map((a) => ({ maxNewTokens: a.turn.maxNewTokens, generatedTokens: 0 }));
  const groups = byGeneration(admitted.map((a) => a.generation)).flatMap((same) =>
    policy.batching === 'static' ? [same] : prefillGroups(same.map((i) => { const a = admitted[i] as Admitted; return a.turn.promptIds.length - a.cachedLength; }), policy.lengthBucketTokens).map((g) => g.map((j) => same[j] as number)),
  );
  return { groups, steps: policy.batching === 'static' || alone ? decodeSteps(rows, policy) : 1 };
}
