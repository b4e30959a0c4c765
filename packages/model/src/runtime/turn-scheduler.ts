import { AppError, ErrorCode, maxOf } from '@sqlenv/shared';
import { uniformsForSeed } from './batch.ts';
import type { ModelConfig } from '../io/config.ts';
import { DEFAULT_PREFILL_CHUNK_TOKENS } from '../graphs/generation-graph.ts';
import { checkRowInput, type Generator, type GenerationRequest, type GenerationResult, type RowInput, type RowOutput } from './generator.ts';
import { commonPrefixLength, compactRowCache, feedsRunUncopied, KvCacheStore, kvBytesPerToken, truncateRowCache, type RowKvCache } from './kv-cache.ts';
import type { LoraWeights } from '../graphs/lora.ts';
import { ResidentBatch, residentBatchOf, type ResidentRow } from './resident-batch.ts';

/** Fewest tokens a turn takes from a shared prefix (shorter ones are not worth a cache copy), and the least a turn is held back for. */
export const MIN_SHARED_PREFIX_TOKENS = 16;

/**
 * What one more prefill run costs beyond its token positions, in positions: measured on the 2-core
 * development machine for sqlenv-tiny against 300-token caches, a run costs ~2.5 ms plus ~50 µs per
 * position (rows × padded width), so a run is worth ~50 positions (docs/inference.md, "Prefill runs").
 * For larger models a position costs more and the fixed part less, so this splits less than it could.
 */
export const PREFILL_RUN_COST_TOKENS = 64;

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

/**
 * The engine's scheduler, on the inference thread: continuous batching over
 * decode chunks, per-episode KV caches kept between turns, and shared prompt
 * prefixes across episodes.
 *
 *   waiting turns ──admit──▶ prefill run (new tokens only, against the episode's parked cache)
 *                                   │
 *   active rows ◀───────────────────┘
 *        │  decode chunk: every active row feeds its last token, ≤ chunkSteps steps
 *        ├─ finished rows: resolve, park the cache under the turn's cacheKey (LRU, byte budget)
 *        └─ the rest stay active; waiting turns are admitted before the next chunk
 *           (after waiting up to returnWaitMs for the episodes whose turns just ended)
 *
 * An adapter swap applies once the turns submitted before it are admitted; each
 * row keeps the adapter it was admitted under, and rows of two adapters decode
 * in separate runs until the older ones finish.
 *
 * A turn without a cache of its own (an episode's first turn, or one whose cache
 * was evicted) starts from the longest shared prefix of its prompt, if any: the
 * prompt caches of earlier such turns, kept after their prefill run (the system
 * prompt; a GRPO group's common first prompt). A turn that shares more with a
 * turn being admitted to the same prefill run than with any kept prefix waits
 * for the next prefill run, which then starts it from that turn's prompt.
 *
 * Each row reads its uniforms from its seed's stream at its own offset, so a
 * turn's tokens depend neither on the chunking nor on its batch-mates.
 * `chunkSteps: Infinity` with `reuseKv: false` is the static engine: a batch
 * is admitted only when none is running and decodes in one run until its
 * longest row stops, every turn re-prefilling its whole prompt.
 */
export interface TurnSchedulerOptions {
  /** Keep each episode's cache between turns (by the request's `cacheKey`). */
  reuseKv: boolean;
  /** With `reuseKv`: start turns without a cache of their own from a shared prompt prefix. */
  sharePrefixes: boolean;
  /** Decode steps per run before finished rows leave and waiting turns join; Infinity = static batches. */
  chunkSteps: number;
  maxBatchSize: number;
  /** Bound on the cache bytes of active rows (reserved at prompt + max new tokens) plus parked caches. */
  kvCacheBytes: number;
  /** Bound on one prefill run's attention scores, rows × heads × new tokens × (past + new tokens) × 4 B. */
  maxPrefillScoresBytes: number;
  lengthBucketTokens: number;
  batchWindowMs: number;
  /**
   * Continuous batching: after a run from which turns finished, wait up to this long for their
   * episodes' next turns before the next decode chunk, so an episode back from its environment step
   * joins the next chunk instead of the one after. Bounded further by half the last iteration's time;
   * 0 turns it off.
   */
  returnWaitMs: number;
  /**
   * Continuous batching: keep the decode batch's cache in place between chunks (resident-batch.ts),
   * so a chunk copies only the slots it added and the rows that joined or moved, not every row's
   * whole cache. Default true; false assembles a new batch for every chunk whose rows changed.
   */
  residentBatch?: boolean;
  /**
   * Continuous batching: a run that decodes ends early once this share of its rows has stopped (at
   * least one row), so they leave and waiting turns join without waiting for the chunk's last step;
   * the rows still running go on in the next run. 1 (the default): a run ends when all its rows have
   * stopped or after `chunkSteps` steps.
   */
  chunkStopShare?: number;
  topK: number;
  stopIds: readonly number[];
}

export interface SchedulerTurn extends GenerationRequest {
  maxNewTokens: number;
  /** Whose cache this turn continues and leaves behind (an episode id); none: nothing is kept. */
  cacheKey?: string;
}

export interface SchedulerResult extends GenerationResult {
  policyVersion: number;
}

/** Counters over the scheduler's life (the engine reports differences). */
export interface SchedulerStats {
  /** Generation runs (prefill runs and decode chunks). */
  runs: number;
  /** Rows summed over runs. */
  rows: number;
  /** Loop iterations summed over runs. */
  steps: number;
  /** Rows × loop iterations summed over runs: sampled tokens computed, kept or not. */
  rowSteps: number;
  /** Prompt tokens fed to prefill runs (cached ones not counted). */
  prefillTokens: number;
  /** Prompt tokens served from a parked cache or a shared prefix instead. */
  reusedTokens: number;
  /** Of `reusedTokens`, those served from a shared prefix (another turn's prompt). */
  sharedTokens: number;
  /** Runs whose past was fed without assembling a batch: the resident batch's arrays, or the previous run's outputs (its rows in its order). */
  uncopiedRuns: number;
  /** Parked caches dropped for room (not counting those dropped by an adapter swap). */
  evictions: number;
  turns: number;
  /** New tokens returned (after each turn's own max-new-tokens cut). */
  generatedTokens: number;
  /** Wall time inside generation runs, in milliseconds. */
  busyMs: number;
  /** Rows × wall time of each run, in row-milliseconds: ÷ elapsed time = the turns inside a model run on average. */
  rowMs: number;
  /** Σ over turns of the time from their arrival to the start of their prefill run, in milliseconds. */
  queueMs: number;
  /** Σ over turns that continue an episode of the time since its previous turn finished here (the agent, its environment step, and any run this thread was inside when the turn came back), in milliseconds. */
  awayMs: number;
  /** Turns counted in `awayMs`. */
  returns: number;
  /** Wall time spent waiting for returning episodes between runs (`returnWaitMs`), in milliseconds. */
  returnWaitMs: number;
  /** Wall time of the runs that prefill admitted turns (part of `busyMs`; such a run decodes on only when nothing else is running), in milliseconds. */
  admitMs: number;
  /** Σ over those runs of the rows already decoding that sat out the run (the decode batch stalls while turns are prefilled) × its time, in row-milliseconds. */
  stalledRowMs: number;
}

/** Counters at zero: a new scheduler's, and what the engine reports before the first turn. */
export function emptySchedulerStats(): SchedulerStats {
  return { runs: 0, rows: 0, steps: 0, rowSteps: 0, prefillTokens: 0, reusedTokens: 0, sharedTokens: 0, uncopiedRuns: 0, evictions: 0, turns: 0, generatedTokens: 0, busyMs: 0, rowMs: 0, queueMs: 0, awayMs: 0, returns: 0, returnWaitMs: 0, admitMs: 0, stalledRowMs: 0 };
}

interface Turn {
  request: SchedulerTurn;
  /** Swaps requested before this turn arrived: it runs under the adapter they leave. */
  epoch: number;
  uniforms: Float32Array;
  /** `performance.now()` when it arrived. */
  arrived: number;
  resolve: (result: SchedulerResult) => void;
  reject: (error: AppError) => void;
}

interface Row {
  turn: Turn;
  /** Prompt and the tokens generated so far. */
  ids: number[];
  /** Tokens of `ids` held by `cache`; the rest are fed by the next run. */
  cachedLength: number;
  cache: RowKvCache | undefined;
  /** Where the cache it started from came from: its episode's parked cache, a shared prefix, or none. */
  source: 'own' | 'shared' | undefined;
  /** Tokens of the prompt it started with in its cache. */
  startedFrom: number;
  generated: Pick<GenerationResult, 'tokens' | 'logprobs' | 'sampleLogprobs'>;
  policyVersion: number;
  /** The adapter it runs under from start to end: the one applied when it was admitted. */
  lora: LoraWeights | undefined;
  /** A stop token was sampled (possibly past the turn's own budget). */
  stopped: boolean;
  /** Its run failed and the turn was rejected. */
  failed: boolean;
}

interface Swap {
  epoch: number;
  weights: LoraWeights | null;
  version: number;
  done: () => void;
}

export class TurnScheduler {
  readonly #generator: Generator;
  readonly #config: ModelConfig;
  readonly #options: TurnSchedulerOptions;
  readonly #store: KvCacheStore;
  readonly #bytesPerToken: number;
  readonly #waiting: Turn[] = [];
  #active: Row[] = [];
  readonly #swaps: Swap[] = [];
  #epochRequested = 0;
  #epochApplied = 0;
  #lora: LoraWeights | undefined;
  #version = 0;
  #running = false;
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** Turns with a cache key that finished in the current iteration: their episodes' next turns are expected back. */
  #finishedThisIteration = 0;
  /** During a wait for returning turns: counts one returned turn. */
  #onReturn: (() => void) | undefined;
  /**
   * Episodes whose last turn finished here and whose next turn has not arrived, with when it finished
   * (oldest first; bounded): `awayMs`, and the returns a wait for returning turns counts.
   */
  readonly #lastFinished = new Map<string, number>();
  /** The decode batch's cache, kept between chunks (continuous batching with `residentBatch`). */
  readonly #resident: ResidentBatch | undefined;
  /** `chunkStopShare`, its default applied. */
  readonly #chunkStopShare: number;
  readonly stats: SchedulerStats = emptySchedulerStats();

  constructor(generator: Generator, options: TurnSchedulerOptions) {
    if (!(options.chunkSteps >= 1)) throw new AppError(ErrorCode.VALIDATION, `chunkSteps must be ≥ 1 (or Infinity), got ${options.chunkSteps}`);
    this.#chunkStopShare = options.chunkStopShare ?? 1;
    if (!(this.#chunkStopShare > 0 && this.#chunkStopShare <= 1)) throw new AppError(ErrorCode.VALIDATION, `chunkStopShare must be in (0, 1], got ${this.#chunkStopShare}`);
    this.#generator = generator;
    this.#config = generator.config;
    this.#options = options;
    this.#store = new KvCacheStore(generator.config);
    this.#bytesPerToken = kvBytesPerToken(generator.config);
    // Room for two chunks' slots (more when runs end early) before the batch's arrays grow (each growth copies every row once).
    if (Number.isFinite(options.chunkSteps) && options.residentBatch !== false) {
      this.#resident = new ResidentBatch(generator.config, Math.max(options.lengthBucketTokens, 2 * options.chunkSteps));
    }
  }

  /** Bytes of parked caches now. */
  get parkedBytes(): number {
    return this.#store.sizeBytes;
  }

  submit(request: SchedulerTurn): Promise<SchedulerResult> {
    return new Promise((resolve, reject) => {
      try {
        if (!Number.isInteger(request.maxNewTokens) || request.maxNewTokens < 1) {
          throw new AppError(ErrorCode.VALIDATION, `maxNewTokens must be an integer ≥ 1, got ${request.maxNewTokens}`);
        }
        checkRowInput({ inputIds: request.promptIds, ...(request.topP === undefined ? {} : { topP: request.topP }) }, this.#config.vocabSize);
      } catch (error) {
        reject(error as AppError);
        return;
      }
      const arrived = performance.now();
      this.#waiting.push({ request, epoch: this.#epochRequested, uniforms: uniformsForSeed(request.seed ?? 0, request.maxNewTokens), arrived, resolve, reject });
      if (this.#noteArrival(request.cacheKey, arrived)) this.#onReturn?.();
      this.#kick(true);
    });
  }

  /**
   * Swap the adapter once every turn submitted before this call is admitted: those turns run to
   * their end under the adapter they started with (a turn never mixes adapters; rows of the two
   * decode in separate runs until the old ones finish), turns submitted later under the new one.
   * New tensors make the parked caches stale (their keys and values came from the old adapter), so
   * they are dropped, and the old adapter's rows park nothing: the next turn of each episode
   * re-prefills and gets exactly the tokens a fresh engine would. `null` keeps the tensors (and the
   * caches) and only moves the version. Resolves when applied.
   */
  setLora(weights: LoraWeights | null, version: number): Promise<void> {
    return new Promise((resolve) => {
      this.#swaps.push({ epoch: ++this.#epochRequested, weights, version, done: resolve });
      this.#kick(false);
    });
  }

  get policyVersion(): number {
    return this.#version;
  }

  #kick(fromSubmit: boolean): void {
    if (this.#running) return;
    const window = this.#options.batchWindowMs;
    if (fromSubmit && window > 0 && this.#waiting.length < this.#options.maxBatchSize) {
      this.#timer ??= setTimeout(() => {
        this.#timer = undefined;
        void this.#loop();
      }, window);
      return;
    }
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    void this.#loop();
  }

  /** The main loop: while anything is waiting or active, one prefill run for the admitted turns, then one decode chunk. */
  async #loop(): Promise<void> {
    if (this.#running) return;
    this.#running = true;
    try {
      for (;;) {
        this.#applySwaps();
        // A swap waits only for earlier waiting turns, which #admit takes first, so nothing waits forever.
        if (this.#active.length === 0 && this.#waiting.length === 0) break;
        const iterationStarted = performance.now();
        const { rows: admitted, morePrefill } = this.#admit();
        const static_ = !Number.isFinite(this.#options.chunkSteps);
        if (admitted.length > 0) {
          // Static: the batch decodes to its end in this run. Continuous: the prefill samples one token
          // and the rows join the next decode chunk with everyone else — unless there is no one else
          // (nothing active or waiting): then the prefill run decodes the whole first chunk itself.
          const alone = this.#active.length === 0 && this.#waiting.length === 0;
          const admitStarted = performance.now();
          await this.#run(admitted, static_ || alone ? this.#chunkFor(admitted) : 1);
          const admitMs = performance.now() - admitStarted;
          this.stats.admitMs += admitMs;
          this.stats.stalledRowMs += this.#active.length * admitMs;
          this.#sharePrompts(admitted);
          this.#active.push(...admitted.filter((r) => !this.#finishIfDone(r)));
        }
        // Turns kept out only by one prefill run's scores bound are prefilled first, so they join this chunk.
        if (!static_ && !morePrefill && this.#active.length > 0) {
          this.#holdResident();
          await this.#run(this.#active, this.#chunkFor(this.#active));
          this.#active = this.#active.filter((r) => !this.#finishIfDone(r));
          // Nothing left to decode: the batch's arrays go (the next rows start a new one).
          if (this.#active.length === 0) this.#resident?.clear();
        }
        // Let the thread's messages in (new turns, swaps) before the next chunk, waiting a little for the
        // episodes whose turns just finished when they are likely back soon.
        await this.#awaitReturns(performance.now() - iterationStarted);
      }
    } finally {
      this.#running = false;
    }
  }

  /**
   * Between iterations: yield to the thread's messages, and when turns finished in this iteration and
   * the batch has room, wait until their episodes' next turns are back — at most `returnWaitMs` and
   * half the iteration's time (so waiting never takes more than a third of the engine's time). An
   * episode that ended never returns; the bound ends the wait.
   */
  async #awaitReturns(iterationMs: number): Promise<void> {
    const expected = this.#finishedThisIteration;
    this.#finishedThisIteration = 0;
    const { returnWaitMs, maxBatchSize } = this.#options;
    const room = this.#active.length + this.#waiting.length < maxBatchSize;
    const bound = Math.min(returnWaitMs, iterationMs / 2);
    // `expected` is 0 in static runs: #finishIfDone counts only where chunks are finite.
    if (expected === 0 || !room || !(bound >= 1)) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      return;
    }
    let pending = expected;
    const started = performance.now();
    await new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.#onReturn = undefined;
        resolve();
      };
      const timer = setTimeout(done, bound);
      this.#onReturn = () => {
        pending--;
        if (pending <= 0 || this.#active.length + this.#waiting.length >= maxBatchSize) done();
      };
    });
    this.stats.returnWaitMs += performance.now() - started;
  }

  /** A turn arrived: whether its episode's last turn finished here (a return), counting the time it spent away. */
  #noteArrival(cacheKey: string | undefined, arrived: number): boolean {
    if (cacheKey === undefined) return false;
    const finished = this.#lastFinished.get(cacheKey);
    if (finished === undefined) return false;
    this.#lastFinished.delete(cacheKey);
    this.stats.awayMs += arrived - finished;
    this.stats.returns++;
    return true;
  }

  /** Whether a row's keys and values are those of the adapter applied now (a swap may have come since it was admitted). */
  #underCurrentAdapter(row: Row): boolean {
    return row.lora === this.#lora;
  }

  #chunkFor(rows: readonly Row[]): number {
    const remaining = maxOf(rows.map((r) => r.turn.request.maxNewTokens - r.generated.tokens.length));
    return Math.max(1, Math.min(this.#options.chunkSteps, remaining));
  }

  /**
   * Apply the swaps whose earlier turns are all admitted. Turns submitted before a swap run under
   * what it replaces: each row keeps the adapter it was admitted under to its end (rows of two
   * adapters decode in separate runs), so later turns need not wait for earlier ones to finish.
   */
  #applySwaps(): void {
    for (;;) {
      const swap = this.#swaps[0];
      if (swap === undefined) return;
      if (this.#waiting.some((t) => t.epoch < swap.epoch)) return;
      this.#swaps.shift();
      if (swap.weights !== null) {
        this.#lora = swap.weights;
        this.#store.clear();
      }
      this.#version = swap.version;
      this.#epochApplied = swap.epoch;
      swap.done();
    }
  }

  /**
   * Waiting turns that join now: FIFO, under the batch size, the KV budget and the prefill scores
   * bound. `morePrefill`: the next waiting turn was kept out by the scores bound only.
   */
  #admit(): { rows: Row[]; morePrefill: boolean } {
    const { maxBatchSize, maxPrefillScoresBytes, lengthBucketTokens: bucket } = this.#options;
    const static_ = !Number.isFinite(this.#options.chunkSteps);
    if (static_ && this.#active.length > 0) return { rows: [], morePrefill: false };
    const admitted: Row[] = [];
    let reserved = this.#active.reduce((n, r) => n + this.#reservedBytes(r), 0);
    let widest = 0;
    let longest = 0;
    while (this.#waiting.length > 0 && this.#active.length + admitted.length < maxBatchSize) {
      const turn = this.#waiting[0] as Turn;
      // Every earlier turn is admitted (FIFO): a version-only swap it waits for can apply now.
      if (turn.epoch !== this.#epochApplied) this.#applySwaps();
      if (turn.epoch !== this.#epochApplied) break;
      const row = this.#claim(turn);
      // Shares more with a prompt prefilled in this run than with any kept prefix: start it from that prompt next run.
      if (!static_ && this.#sharesMore(row, admitted)) {
        this.#unclaim(row);
        return { rows: admitted, morePrefill: true };
      }
      const fresh = row.ids.length - row.cachedLength;
      const nextWidest = Math.max(widest, Math.ceil(fresh / bucket) * bucket);
      const nextLongest = Math.max(longest, row.cachedLength);
      // The graph prefills in chunks of C new tokens: a run's widest scores are (rows, heads, min(C, new), cached + new).
      const scores = (admitted.length + 1) * this.#config.numHeads * Math.min(DEFAULT_PREFILL_CHUNK_TOKENS, nextWidest) * (nextLongest + nextWidest) * 4;
      const bytes = this.#reservedBytes(row);
      const first = this.#active.length === 0 && admitted.length === 0;
      // The scores bound is per prefill run (active rows decode separately); the budget covers everything.
      if (admitted.length > 0 && scores > maxPrefillScoresBytes) {
        this.#unclaim(row);
        return { rows: admitted, morePrefill: true };
      }
      if (!first && !this.#makeRoom(reserved + bytes)) {
        this.#unclaim(row);
        break;
      }
      if (first) this.#makeRoom(reserved + bytes);
      this.#waiting.shift();
      admitted.push(row);
      reserved += bytes;
      widest = nextWidest;
      longest = nextLongest;
    }
    return { rows: admitted, morePrefill: false };
  }

  /**
   * A turn as a row, continuing its episode's parked cache when the prompt extends what it holds,
   * else starting from the longest shared prefix of its prompt (at least MIN_SHARED_PREFIX_TOKENS).
   */
  #claim(turn: Turn): Row {
    const { promptIds, cacheKey } = turn.request;
    const row: Row = { turn, ids: [...promptIds], cachedLength: 0, cache: undefined, source: undefined, startedFrom: 0, generated: { tokens: [], logprobs: [], sampleLogprobs: [] }, policyVersion: this.#version, lora: this.#lora, stopped: false, failed: false };
    if (!this.#options.reuseKv) return row;
    const parked = cacheKey === undefined ? undefined : this.#store.take(cacheKey);
    if (parked !== undefined && parked.ids.length < promptIds.length && parked.ids.every((id, i) => promptIds[i] === id)) {
      row.cache = parked.cache;
      row.cachedLength = row.startedFrom = parked.ids.length;
      row.source = 'own';
      return row;
    }
    // A prompt that does not extend the cached ids (a truncated or rewritten context) re-prefills; the stale cache is dropped.
    if (!this.#options.sharePrefixes) return row;
    // At least the prompt's last token is fed: the run samples from its position.
    const shared = this.#store.longestPrefix(promptIds, promptIds.length - 1);
    if (shared !== undefined && shared.length >= MIN_SHARED_PREFIX_TOKENS) {
      row.cache = truncateRowCache(this.#config, shared.cache, shared.length);
      row.cachedLength = row.startedFrom = shared.length;
      row.source = 'shared';
    }
    return row;
  }

  /** Put a claimed cache back (the turn was not admitted after all); a shared prefix is still in the store. */
  #unclaim(row: Row): void {
    const key = row.turn.request.cacheKey;
    if (row.source === 'own' && row.cache !== undefined && key !== undefined && this.#underCurrentAdapter(row)) this.#store.park(key, { ids: row.ids.slice(0, row.cachedLength), cache: compactRowCache(row.cache) });
  }

  /** Whether the prompt of a turn admitted to this run would give `row` MIN_SHARED_PREFIX_TOKENS more than it starts from. */
  #sharesMore(row: Row, admitted: readonly Row[]): boolean {
    if (!this.#options.reuseKv || !this.#options.sharePrefixes || row.source === 'own') return false;
    const prompt = row.turn.request.promptIds;
    return admitted.some(
      (other) => this.#sharesPrompt(other) && Math.min(prompt.length - 1, commonPrefixLength(prompt, other.turn.request.promptIds)) >= row.cachedLength + MIN_SHARED_PREFIX_TOKENS,
    );
  }

  /** A row whose prompt cache is kept as a shared prefix after its prefill run: it had no cache of its own. */
  #sharesPrompt(row: Row): boolean {
    return this.#options.reuseKv && this.#options.sharePrefixes && row.source !== 'own' && row.turn.request.promptIds.length > MIN_SHARED_PREFIX_TOKENS;
  }

  /**
   * After a prefill run: keep the prompt cache of each row that had no cache of its own and
   * computed more of its prompt than it took from a shared prefix. At most max(2, maxBatchSize / 4)
   * prefixes are kept (about the GRPO groups in flight), least recently used dropped first.
   */
  #sharePrompts(rows: readonly Row[]): void {
    let kept = false;
    for (const row of rows) {
      const prompt = row.turn.request.promptIds;
      // A row admitted before an adapter swap computed its prompt under the old adapter: not kept.
      if (!this.#sharesPrompt(row) || row.cache === undefined || row.cachedLength < prompt.length || !this.#underCurrentAdapter(row)) continue;
      // Took all but the last token from a shared prefix: that prefix serves the next such turn as well.
      if (row.source === 'shared' && prompt.length - row.startedFrom <= 1) continue;
      this.#store.parkPrefix({ ids: [...prompt], cache: truncateRowCache(this.#config, row.cache, prompt.length) });
      kept = true;
    }
    if (!kept) return;
    while (this.#store.prefixCount > Math.max(2, Math.ceil(this.#options.maxBatchSize / 4)) && this.#store.evictOldestPrefix()) this.stats.evictions++;
    if (!this.#makeRoom(this.#active.reduce((n, r) => n + this.#reservedBytes(r), 0) + rows.reduce((n, r) => n + this.#reservedBytes(r), 0))) {
      // Over the budget with the rows alone: the prefixes just kept go again.
      while (this.#store.prefixCount > 0 && this.#store.evictOldestPrefix()) this.stats.evictions++;
    }
  }

  /** Bytes a row may grow to: its prompt plus its whole token budget. */
  #reservedBytes(row: Row): number {
    return (row.turn.request.promptIds.length + row.turn.request.maxNewTokens) * this.#bytesPerToken;
  }

  /** Evict parked caches until active + parked fits `needed`; false when even an empty store would not. */
  #makeRoom(activeBytes: number): boolean {
    const budget = this.#options.kvCacheBytes;
    if (activeBytes > budget) return false;
    while (activeBytes + this.#store.sizeBytes > budget && this.#store.evictOldest()) this.stats.evictions++;
    return true;
  }

  /**
   * Before a decode chunk: the resident batch holds exactly the active rows (rows that finished
   * leave, with their caches already parked; rows just prefilled are copied in), and the active
   * rows take its order, so the chunk feeds its arrays uncopied.
   */
  #holdResident(): void {
    const resident = this.#resident;
    if (resident === undefined) return;
    const held = resident.hold(this.#active.map((r) => r.cache));
    this.#active.forEach((r, i) => {
      r.cache = held[i];
    });
    this.#active.sort((a, b) => (a.cache as ResidentRow).index - (b.cache as ResidentRow).index);
  }

  /** One run per adapter among `rows` (one run, but for the turns around an adapter swap). */
  async #run(rows: readonly Row[], steps: number): Promise<void> {
    const adapters = [...new Set(rows.map((r) => r.lora))];
    for (const lora of adapters) {
      const same = adapters.length === 1 ? rows : rows.filter((r) => r.lora === lora);
      // A prefill run pads every row to its widest: rows of very different widths go in separate runs
      // (the static engine keeps one batch, as it always did).
      const groups = Number.isFinite(this.#options.chunkSteps) ? prefillGroups(same.map((r) => r.ids.length - r.cachedLength), this.#options.lengthBucketTokens) : [same.map((_, i) => i)];
      for (const group of groups) await this.#runOne(group.map((i) => same[i] as Row), steps, lora);
    }
  }

  async #runOne(rows: readonly Row[], steps: number, lora: LoraWeights | undefined): Promise<void> {
    const inputs: RowInput[] = rows.map((r) => {
      const done = r.generated.tokens.length;
      return {
        inputIds: r.ids.slice(r.cachedLength),
        ...(r.cache === undefined ? {} : { cache: r.cache }),
        uniforms: r.turn.uniforms.subarray(done, done + steps),
        ...(r.turn.request.temperature === undefined ? {} : { temperature: r.turn.request.temperature }),
        ...(r.turn.request.topP === undefined ? {} : { topP: r.turn.request.topP }),
      };
    });
    const prefill = inputs.reduce((n, r) => Math.max(n, r.inputIds.length), 0) > 1;
    const caches = inputs.map((r) => r.cache);
    if (feedsRunUncopied(caches) || residentBatchOf(caches) !== undefined) this.stats.uncopiedRuns++;
    // The run owns the caches now: it lets go of them once its feeds are built (a failed run fails its turns anyway).
    for (const r of rows) r.cache = undefined;
    const started = performance.now();
    for (const r of rows) if (r.generated.tokens.length === 0) this.stats.queueMs += started - r.turn.arrived;
    let outputs: RowOutput[];
    try {
      outputs = await this.#generator.runRows(inputs, {
        steps,
        // Within a turn the cache always crosses chunks; between turns only with reuseKv.
        keepCache: this.#options.reuseKv || Number.isFinite(this.#options.chunkSteps),
        releaseCaches: true,
        topK: this.#options.topK,
        stopIds: this.#options.stopIds,
        ...(Number.isFinite(this.#options.chunkSteps) ? { minRunning: rows.length - Math.max(1, Math.ceil(rows.length * this.#chunkStopShare)) } : {}),
        ...(lora === undefined ? {} : { lora }),
        ...(prefill ? { padToWidth: Math.ceil(maxOf(inputs.map((r) => r.inputIds.length)) / this.#options.lengthBucketTokens) * this.#options.lengthBucketTokens } : {}),
      });
    } catch (error) {
      const appError = error instanceof AppError ? error : new AppError(ErrorCode.RUNTIME, String(error), { cause: error });
      for (const r of rows) {
        r.turn.reject(appError);
        r.failed = true;
        r.cache = undefined;
      }
      return;
    } finally {
      const ms = performance.now() - started;
      this.stats.busyMs += ms;
      this.stats.rowMs += rows.length * ms;
    }
    const computed = outputs[0]?.steps ?? 0;
    this.stats.runs++;
    this.stats.rows += rows.length;
    this.stats.steps += computed;
    this.stats.rowSteps += rows.length * computed;
    rows.forEach((r, b) => {
      const out = outputs[b] as RowOutput;
      const fed = inputs[b]?.inputIds.length ?? 0;
      if (r.generated.tokens.length === 0) {
        this.stats.prefillTokens += fed;
        this.stats.reusedTokens += r.cachedLength;
        if (r.source === 'shared') this.stats.sharedTokens += r.cachedLength;
      }
      r.generated.tokens.push(...out.tokens);
      r.generated.logprobs.push(...out.logprobs);
      r.generated.sampleLogprobs.push(...out.sampleLogprobs);
      r.ids.push(...out.tokens);
      // The cache now holds everything fed: the old inputs and all sampled tokens but the last.
      r.cache = out.cache;
      r.cachedLength = out.cache === undefined ? 0 : r.cachedLength + fed + computed - 1;
      r.stopped = out.stopped;
    });
  }

  /** Resolve a row whose turn is over (stop token or its budget) and park its cache; false if it goes on. */
  #finishIfDone(row: Row): boolean {
    const { maxNewTokens, cacheKey } = row.turn.request;
    const produced = row.generated.tokens.length;
    if (row.failed) return true;
    if (!row.stopped && produced < maxNewTokens) return false;
    // A row decoded past its own budget (its batch-mates needed more steps) is cut there: rows are independent, so this is exact.
    const result: SchedulerResult = {
      tokens: row.generated.tokens.slice(0, maxNewTokens),
      logprobs: row.generated.logprobs.slice(0, maxNewTokens),
      sampleLogprobs: row.generated.sampleLogprobs.slice(0, maxNewTokens),
      finishReason: row.stopped && produced <= maxNewTokens ? 'stop' : 'length',
      policyVersion: row.policyVersion,
    };
    this.stats.turns++;
    this.stats.generatedTokens += result.tokens.length;
    // A row admitted before an adapter swap holds keys and values of the old adapter: not kept.
    if (this.#options.reuseKv && cacheKey !== undefined && row.cache !== undefined && this.#underCurrentAdapter(row)) {
      // Valid: the prompt and the returned tokens but the last (never fed); slots fed after a stop or past the budget are cut.
      const valid = Math.min(row.cachedLength, row.turn.request.promptIds.length + result.tokens.length - 1);
      this.#store.park(cacheKey, { ids: row.ids.slice(0, valid), cache: truncateRowCache(this.#config, row.cache, valid) });
      this.#makeRoom(this.#active.reduce((n, r) => (r === row ? n : n + this.#reservedBytes(r)), 0));
      // Episodes do not say when they end, so finished episodes' caches would sit in the budget until evicted.
      // At most maxBatchSize episodes are in flight (the worker's concurrency): twice that many caches covers
      // every live one, and the least recently used beyond it are an ended episode's.
      while (this.#store.size > 2 * this.#options.maxBatchSize && this.#store.evictOldest()) this.stats.evictions++;
    }
    row.cache = undefined;
    if (cacheKey !== undefined) {
      this.#lastFinished.delete(cacheKey);
      this.#lastFinished.set(cacheKey, performance.now());
      // Ended episodes never return: keep the most recent few times the batch.
      for (const key of this.#lastFinished.keys()) {
        if (this.#lastFinished.size <= 4 * this.#options.maxBatchSize) break;
        this.#lastFinished.delete(key);
      }
    }
    if (cacheKey !== undefined && this.#options.returnWaitMs > 0 && Number.isFinite(this.#options.chunkSteps)) this.#finishedThisIteration++;
    row.turn.resolve(result);
    return true;
  }
}
