import { AppError, ErrorCode } from '@sqlenv/shared';
import type { LoraWeights } from '../graphs/lora.ts';
import { AdapterEpochs } from './adapter-epochs.ts';
import { uniformsForSeed } from './batch.ts';
import type { SchedulerPolicy } from './engine-options.ts';
import { Executor, turnResult, type Row, type Turn, type TurnRequest, type TurnLane, type TurnResult } from './executor.ts';
import { checkRowInput, type Generator } from './generator.ts';
import type { RowKvCache } from './kv-cache.ts';
import { KvStore } from './kv-store.ts';
import { byGeneration, decodes, decodeSteps, planAdmission, sharesPrompt, type Claim, type PlanStep, type SchedulerState } from './scheduler.ts';
import { StatsRecorder, type SchedulerStats } from './scheduler-stats.ts';

/**
 * The engine on its worker thread: continuous batching over decode chunks, per-episode KV caches kept
 * between turns, shared prompt prefixes across episodes. Each iteration of its loop:
 *
 *   state ──planAdmission (scheduler.ts)──▶ swaps, admitted turns, their caches, evictions, prefill runs
 *     executed here: prefill runs (executor.ts) ──▶ finished rows resolve and park their caches (kv-store.ts)
 *   active rows ──decodes?──▶ held in the resident decode batch, one decode chunk per adapter generation
 *     ──▶ finished rows resolve and park; the rest stay active; yield to the thread's messages
 *
 * Each row reads its uniforms from its seed's stream at its own offset, so which uniform a token is
 * drawn with depends neither on the chunking nor on its batch-mates; its log-probs do, by float
 * rounding (docs/inference.md, "Exactness"). Lanes in lockstep (deterministic engines) fix the batches.
 */
export class EngineCore {
  readonly #generator: Generator;
  readonly #policy: SchedulerPolicy;
  readonly #store: KvStore;
  readonly #epochs = new AdapterEpochs();
  readonly #recorder: StatsRecorder;
  readonly #executor: Executor;
  readonly #waiting: Turn[] = [];
  /** Deterministic engines: the evaluation lanes open on this replica. */
  readonly #lanes = new Set<number>();
  /** Loop iterations so far (a lane turn's stamp). */
  #iteration = 0;
  #active: Row[] = [];
  #running = false;
  #timer: ReturnType<typeof setTimeout> | undefined;

  constructor(generator: Generator, policy: SchedulerPolicy) {
    if (!(policy.chunkSteps >= 1)) throw new AppError(ErrorCode.VALIDATION, `chunkSteps must be ≥ 1, got ${policy.chunkSteps}`);
    if (!(policy.chunkStopShare > 0 && policy.chunkStopShare <= 1)) throw new AppError(ErrorCode.VALIDATION, `chunkStopShare must be in (0, 1], got ${policy.chunkStopShare}`);
    this.#generator = generator;
    this.#policy = policy;
    // Room for two chunks' slots (more when runs end early) before the decode batch's arrays grow (each growth copies every row once).
    this.#store = new KvStore(generator.config, policy.batching === 'continuous' ? Math.max(policy.lengthBucketTokens, 2 * policy.chunkSteps) : 0);
    // Ended episodes never return: keep the most recent few times the batch.
    this.#recorder = new StatsRecorder(4 * policy.maxBatchSize);
    this.#executor = new Executor(generator, policy, this.#recorder);
  }

  get stats(): SchedulerStats {
    return this.#recorder.stats;
  }

  /** Bytes of the caches kept between turns now. */
  get parkedBytes(): number {
    return this.#store.sizeBytes;
  }

  get policyVersion(): number {
    return this.#epochs.version;
  }

  /**
   * Queue one turn. `lane`: an evaluation lane's turn (deterministic engines): the loop goes on only
   * while every open lane has its turn here (planAdmission), and lane turns wait in order of the
   * iteration they arrived in, then of their order key, for no batch window.
   */
  submit(request: TurnRequest, lane?: TurnLane): Promise<TurnResult> {
    return new Promise((resolve, reject) => {
      try {
        if (!Number.isInteger(request.maxNewTokens) || request.maxNewTokens < 1) {
          throw new AppError(ErrorCode.VALIDATION, `maxNewTokens must be an integer ≥ 1, got ${request.maxNewTokens}`);
        }
        checkRowInput({ inputIds: request.promptIds, ...(request.topP === undefined ? {} : { topP: request.topP }) }, this.#generator.config.vocabSize);
      } catch (error) {
        reject(error as AppError);
        return;
      }
      const arrivedMs = performance.now();
      const turn: Turn = { request, epoch: this.#epochs.requested, uniforms: uniformsForSeed(request.seed ?? 0, request.maxNewTokens), arrivedMs, lane, stamp: this.#iteration, resolve, reject };
      if (lane === undefined) this.#waiting.push(turn);
      else this.#waiting.splice(this.#laneSlot(turn), 0, turn);
      this.#recorder.arrived(request.cacheKey, arrivedMs);
      this.#kick(lane === undefined);
    });
  }

  /**
   * Swap the adapter once every turn submitted before this call is admitted: those turns run to
   * their end under the adapter they started with (rows of the two decode in separate runs until the
   * old ones finish), turns submitted later under the new one. New tensors make the kept caches
   * stale, so they are dropped, and the old adapter's rows park nothing: the next turn of each
   * episode re-prefills and gets exactly the tokens a fresh engine would. `null` keeps the tensors
   * (and the caches) and only moves the version. Resolves when applied.
   */
  setLora(weights: LoraWeights | null, version: number): Promise<void> {
    return new Promise((resolve) => {
      this.#epochs.request(weights, version, resolve);
      this.#kick(false);
    });
  }

  /** Where a lane turn waits: after every waiting turn of an earlier iteration or a lower order key. */
  #laneSlot(turn: Turn): number {
    const after = (t: Turn): boolean => t.lane !== undefined && (t.stamp < turn.stamp || (t.stamp === turn.stamp && t.lane.order < (turn.lane as TurnLane).order));
    let at = this.#waiting.length;
    while (at > 0 && !after(this.#waiting[at - 1] as Turn)) at--;
    return at;
  }

  /** A lane opens on this replica (deterministic engines): the loop waits for its turns from now on. */
  openLane(id: number): void {
    this.#lanes.add(id);
  }

  /** A lane plays no more episodes: the loop stops waiting for it. */
  closeLane(id: number): void {
    if (this.#lanes.delete(id)) this.#kick(false);
  }

  #kick(fromSubmit: boolean): void {
    if (this.#running) return;
    const window = this.#policy.batchWindowMs;
    if (fromSubmit && window > 0 && this.#waiting.length < this.#policy.maxBatchSize) {
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

  #state(): SchedulerState {
    return {
      waiting: this.#waiting.map((t) => ({
        promptIds: t.request.promptIds,
        maxNewTokens: t.request.maxNewTokens,
        cacheKey: t.request.cacheKey,
        epoch: t.epoch,
      })),
      active: this.#active.map((r) => ({ promptLength: r.turn.request.promptIds.length, maxNewTokens: r.turn.request.maxNewTokens, generatedTokens: r.generated.tokens.length, generation: r.generation })),
      epochs: { applied: this.#epochs.applied, generation: this.#epochs.generation, pending: this.#epochs.pending },
      kept: this.#store.view(),
      ...(this.#lanes.size === 0 ? {} : { lanes: { open: this.#lanes.size, present: this.#presentLanes() } }),
    };
  }

  /** Open lanes with a turn here, waiting or active. */
  #presentLanes(): number {
    const present = new Set<number>();
    for (const t of this.#waiting) if (t.lane !== undefined && this.#lanes.has(t.lane.id)) present.add(t.lane.id);
    for (const r of this.#active) if (r.turn.lane !== undefined && this.#lanes.has(r.turn.lane.id)) present.add(r.turn.lane.id);
    return present.size;
  }

  async #loop(): Promise<void> {
    if (this.#running) return;
    this.#running = true;
    try {
      for (;;) {
        const plan = planAdmission(this.#state(), this.#policy);
        const admitted = this.#apply(plan.steps);
        if (plan.idle) break;
        // Only iterations that run count: how often an idle engine is woken depends on timing.
        this.#iteration++;
        if (plan.prefill !== undefined) await this.#prefill(admitted, plan.prefill);
        // Turns kept out only by one prefill run's scores bound are prefilled first, so they join this chunk.
        if (decodes(this.#policy, this.#active.length, plan.morePrefill)) await this.#decode();
        // Let the thread's messages in (new turns, swaps) before the next chunk.
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
    } finally {
      this.#running = false;
    }
  }

  /** Execute a plan's steps in order: swaps apply, admitted turns become rows with the caches they claim, evictions go. */
  #apply(steps: readonly PlanStep[]): Row[] {
    const rows: Row[] = [];
    for (const step of steps) {
      if (step.kind === 'swap') {
        if (this.#epochs.applyNext()) this.#store.clear();
        continue;
      }
      const turn = this.#waiting.shift() as Turn;
      rows.push(this.#claim(turn, step.claim, step.dropStale, step.generation));
      this.#recorder.evicted(this.#store.evict(step.evict));
    }
    return rows;
  }

  #claim(turn: Turn, claim: Claim, dropStale: boolean, generation: number): Row {
    const { promptIds, cacheKey } = turn.request;
    const row: Row = { turn, ids: [...promptIds], cachedLength: 0, cache: undefined, source: undefined, startedFrom: 0, generated: { tokens: [], logprobs: [], sampleLogprobs: [] }, policyVersion: this.#epochs.version, generation, lora: this.#epochs.lora, stopped: false, failed: false };
    // A cache that does not match the prompt (a truncated or rewritten context) is dropped.
    if (dropStale) this.#store.take(cacheKey as string);
    if (claim.kind === 'own') {
      row.cache = this.#store.take(cacheKey as string);
      row.source = 'own';
    } else if (claim.kind === 'prefix') {
      row.cache = this.#store.prefix(claim.id, claim.length);
      row.source = 'shared';
    }
    if (claim.kind !== 'none') row.cachedLength = row.startedFrom = claim.length;
    return row;
  }

  async #prefill(admitted: Row[], plan: { groups: number[][]; steps: number }): Promise<void> {
    const started = performance.now();
    for (const group of plan.groups) await this.#executor.run(group.map((i) => admitted[i] as Row), plan.steps);
    this.#recorder.admitted(performance.now() - started, this.#active.length);
    this.#sharePrompts(admitted);
    const active = this.#active;
    this.#active = [...active, ...admitted.filter((r) => !this.#finishIfDone(r, active))];
  }

  /** One decode chunk over every active row, in the resident decode batch, one run per adapter generation. */
  async #decode(): Promise<void> {
    const { batch, rows: held } = this.#store.holdDecodeBatch(this.#active.map((r) => r.cache));
    this.#active.forEach((r, i) => {
      r.cache = held[i];
    });
    // The rows take the batch's order, so a run over all of them feeds its arrays as they are.
    this.#active.sort((a, b) => (a.cache as RowKvCache).row - (b.cache as RowKvCache).row);
    const steps = decodeSteps(
      this.#active.map((r) => ({ maxNewTokens: r.turn.request.maxNewTokens, generatedTokens: r.generated.tokens.length })),
      this.#policy,
    );
    const groups = byGeneration(this.#active.map((r) => r.generation));
    for (const group of groups) await this.#executor.run(group.map((i) => this.#active[i] as Row), steps, groups.length === 1 ? batch : undefined);
    const active = this.#active;
    this.#active = active.filter((r) => !this.#finishIfDone(r, active));
    if (this.#active.length === 0) this.#store.dropDecodeBatch();
  }

  #reservedBytes(row: Row): number {
    return (row.turn.request.promptIds.length + row.turn.request.maxNewTokens) * this.#policy.bytesPerToken;
  }

  /**
   * After a prefill run: keep the prompt cache of each row that had no cache of its own and computed
   * more of its prompt than it took from a shared prefix. At most max(2, maxBatchSize / 4) prefixes
   * are kept (about the GRPO groups in flight), least recently used dropped first.
   */
  #sharePrompts(rows: readonly Row[]): void {
    let kept = false;
    for (const row of rows) {
      const prompt = row.turn.request.promptIds;
      // A row admitted before an adapter swap computed its prompt under the old adapter: not kept.
      if (!sharesPrompt(this.#policy, row.source === 'own', prompt.length) || row.cache === undefined || row.cachedLength < prompt.length || !this.#current(row)) continue;
      // Took all but the last token from a shared prefix: that prefix serves the next such turn as well.
      if (row.source === 'shared' && prompt.length - row.startedFrom <= 1) continue;
      this.#store.parkPrefix([...prompt], row.cache.truncate(prompt.length));
      kept = true;
    }
    if (!kept) return;
    this.#recorder.evicted(this.#store.trimPrefixes(Math.max(2, Math.ceil(this.#policy.maxBatchSize / 4))));
    const activeBytes = [...this.#active, ...rows].reduce((n, r) => n + this.#reservedBytes(r), 0);
    const evicted = this.#store.makeRoom(activeBytes, this.#policy.kvCacheBytes);
    // Over the budget with the rows alone: the prefixes just kept go again.
    this.#recorder.evicted(evicted ?? this.#store.trimPrefixes(0));
  }

  /** Whether a row's keys and values are those of the adapter applied now (a swap may have come since it was admitted). */
  #current(row: Row): boolean {
    return row.generation === this.#epochs.generation;
  }

  /** Resolve a row whose turn is over (stop token or its budget) and park its cache; false if it goes on. `active`: the rows decoding beside it. */
  #finishIfDone(row: Row, active: readonly Row[]): boolean {
    const { maxNewTokens, cacheKey } = row.turn.request;
    if (row.failed) return true;
    if (!row.stopped && row.generated.tokens.length < maxNewTokens) return false;
    const result = turnResult(row);
    this.#recorder.finished(cacheKey, result.tokens.length, performance.now());
    // A row admitted before an adapter swap holds keys and values of the old adapter: not kept.
    if (this.#policy.reuseKv && cacheKey !== undefined && row.cache !== undefined && this.#current(row)) {
      // Valid: the prompt and the returned tokens but the last (never fed); slots fed after a stop or past the budget are cut.
      const valid = Math.min(row.cachedLength, row.turn.request.promptIds.length + result.tokens.length - 1);
      this.#store.park(cacheKey, row.ids.slice(0, valid), row.cache.truncate(valid));
      this.#recorder.evicted(this.#store.makeRoom(active.reduce((n, r) => (r === row ? n : n + this.#reservedBytes(r)), 0), this.#policy.kvCacheBytes) ?? 0);
      // Episodes do not say when they end, so finished episodes' caches would sit in the budget until evicted.
      // At most maxBatchSize episodes are in flight (the worker's concurrency): twice that many caches covers
      // every live one, and the least recently used beyond it are an ended episode's.
      this.#recorder.evicted(this.#store.trimEpisodes(2 * this.#policy.maxBatchSize));
    }
    row.cache = undefined;
    row.turn.resolve(result);
    return true;
  }
}
