import { AppError, ErrorCode, maxOf } from '@sqlenv/shared';
import { uniformsForSeed } from './batch.ts';
import type { ModelConfig } from '../io/config.ts';
import { DEFAULT_PREFILL_CHUNK_TOKENS } from '../graphs/generation-graph.ts';
import { checkRowInput, type Generator, type GenerationRequest, type GenerationResult, type RowInput, type RowOutput } from './generator.ts';
import { KvCacheStore, kvBytesPerToken, truncateRowCache, type RowKvCache } from './kv-cache.ts';
import type { LoraWeights } from '../graphs/lora.ts';

/**
 * The engine's scheduler, on the inference thread: continuous batching over
 * decode chunks and per-episode KV caches kept between turns.
 *
 *   waiting turns ──admit──▶ prefill run (new tokens only, against the episode's parked cache)
 *                                   │
 *   active rows ◀───────────────────┘
 *        │  decode chunk: every active row feeds its last token, ≤ chunkSteps steps
 *        ├─ finished rows: resolve, park the cache under the turn's cacheKey (LRU, byte budget)
 *        └─ the rest stay active; waiting turns are admitted before the next chunk
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
  /** Decode steps per run before finished rows leave and waiting turns join; Infinity = static batches. */
  chunkSteps: number;
  maxBatchSize: number;
  /** Bound on the cache bytes of active rows (reserved at prompt + max new tokens) plus parked caches. */
  kvCacheBytes: number;
  /** Bound on one prefill run's attention scores, rows × heads × new tokens × (past + new tokens) × 4 B. */
  maxPrefillScoresBytes: number;
  lengthBucketTokens: number;
  batchWindowMs: number;
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
  /** Prompt tokens served from a parked cache instead. */
  reusedTokens: number;
  /** Parked caches dropped for room (not counting those dropped by an adapter swap). */
  evictions: number;
  turns: number;
  /** New tokens returned (after each turn's own max-new-tokens cut). */
  generatedTokens: number;
  /** Wall time inside generation runs, in milliseconds. */
  busyMs: number;
}

interface Turn {
  request: SchedulerTurn;
  /** Swaps requested before this turn arrived: it runs under the adapter they leave. */
  epoch: number;
  uniforms: Float32Array;
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
  generated: Pick<GenerationResult, 'tokens' | 'logprobs' | 'sampleLogprobs'>;
  policyVersion: number;
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
  readonly stats: SchedulerStats = { runs: 0, rows: 0, steps: 0, rowSteps: 0, prefillTokens: 0, reusedTokens: 0, evictions: 0, turns: 0, generatedTokens: 0, busyMs: 0 };

  constructor(generator: Generator, options: TurnSchedulerOptions) {
    if (!(options.chunkSteps >= 1)) throw new AppError(ErrorCode.VALIDATION, `chunkSteps must be ≥ 1 (or Infinity), got ${options.chunkSteps}`);
    this.#generator = generator;
    this.#config = generator.config;
    this.#options = options;
    this.#store = new KvCacheStore(generator.config);
    this.#bytesPerToken = kvBytesPerToken(generator.config);
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
      this.#waiting.push({ request, epoch: this.#epochRequested, uniforms: uniformsForSeed(request.seed ?? 0, request.maxNewTokens), resolve, reject });
      this.#kick(true);
    });
  }

  /**
   * Swap the adapter after every turn submitted before this call has finished (a turn never
   * mixes adapters); turns submitted later wait for it. New tensors make the parked caches
   * stale (their keys and values came from the old adapter), so they are dropped: the next turn
   * of each episode re-prefills and gets exactly the tokens a fresh engine would. `null` keeps the
   * tensors (and the caches) and only moves the version.
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
        // With no row active, #applySwaps has applied every swap, so the first waiting turn is admitted below.
        if (this.#active.length === 0 && this.#waiting.length === 0) break;
        const { rows: admitted, morePrefill } = this.#admit();
        const static_ = !Number.isFinite(this.#options.chunkSteps);
        if (admitted.length > 0) {
          // Static: the batch decodes to its end in this run. Continuous: the prefill samples one token
          // and the rows join the next decode chunk with everyone else — unless there is no one else
          // (nothing active or waiting): then the prefill run decodes the whole first chunk itself.
          const alone = this.#active.length === 0 && this.#waiting.length === 0;
          await this.#run(admitted, static_ || alone ? this.#chunkFor(admitted) : 1);
          this.#active.push(...admitted.filter((r) => !this.#finishIfDone(r)));
        }
        // Turns kept out only by one prefill run's scores bound are prefilled first, so they join this chunk.
        if (!static_ && !morePrefill && this.#active.length > 0) {
          await this.#run(this.#active, this.#chunkFor(this.#active));
          this.#active = this.#active.filter((r) => !this.#finishIfDone(r));
        }
        // Let the thread's messages in (new turns, swaps) before the next chunk.
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
    } finally {
      this.#running = false;
    }
  }

  #chunkFor(rows: readonly Row[]): number {
    const remaining = maxOf(rows.map((r) => r.turn.request.maxNewTokens - r.generated.tokens.length));
    return Math.max(1, Math.min(this.#options.chunkSteps, remaining));
  }

  #applySwaps(): void {
    for (;;) {
      const swap = this.#swaps[0];
      if (swap === undefined) return;
      const earlier = this.#active.length > 0 || this.#waiting.some((t) => t.epoch < swap.epoch);
      if (earlier) return;
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
      if (turn.epoch !== this.#epochApplied) break;
      const row = this.#claim(turn);
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

  /** A turn as a row, continuing its episode's parked cache when the prompt extends what it holds. */
  #claim(turn: Turn): Row {
    const { promptIds, cacheKey } = turn.request;
    const row: Row = { turn, ids: [...promptIds], cachedLength: 0, cache: undefined, generated: { tokens: [], logprobs: [], sampleLogprobs: [] }, policyVersion: this.#version, stopped: false, failed: false };
    if (!this.#options.reuseKv || cacheKey === undefined) return row;
    const parked = this.#store.take(cacheKey);
    if (parked === undefined) return row;
    const extends_ = parked.ids.length < promptIds.length && parked.ids.every((id, i) => promptIds[i] === id);
    if (extends_) {
      row.cache = parked.cache;
      row.cachedLength = parked.ids.length;
    }
    // A prompt that does not extend the cached ids (a truncated or rewritten context) re-prefills; the stale cache is dropped.
    return row;
  }

  /** Put a claimed cache back (the turn was not admitted after all). */
  #unclaim(row: Row): void {
    const key = row.turn.request.cacheKey;
    if (row.cache !== undefined && key !== undefined) this.#store.park(key, { ids: row.ids.slice(0, row.cachedLength), cache: row.cache });
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

  async #run(rows: readonly Row[], steps: number): Promise<void> {
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
    const started = performance.now();
    let outputs: RowOutput[];
    try {
      outputs = await this.#generator.runRows(inputs, {
        steps,
        // Within a turn the cache always crosses chunks; between turns only with reuseKv.
        keepCache: this.#options.reuseKv || Number.isFinite(this.#options.chunkSteps),
        topK: this.#options.topK,
        stopIds: this.#options.stopIds,
        ...(this.#lora === undefined ? {} : { lora: this.#lora }),
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
      this.stats.busyMs += performance.now() - started;
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
    if (this.#options.reuseKv && cacheKey !== undefined && row.cache !== undefined) {
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
    row.turn.resolve(result);
    return true;
  }
}
