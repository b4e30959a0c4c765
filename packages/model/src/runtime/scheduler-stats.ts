/** Counters over a worker's life (the engine reports differences). */
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
  /** Runs whose past was the resident decode batch's arrays, fed as they are. */
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
  /** Wall time of the runs that prefill admitted turns (part of `busyMs`; such a run decodes on only when nothing else is running), in milliseconds. */
  admitMs: number;
  /** Σ over those runs of the rows already decoding that sat out the run (the decode batch stalls while turns are prefilled) × its time, in row-milliseconds. */
  stalledRowMs: number;
}

/** Counters at zero: a new worker's, and what the engine reports before the first turn. */
export function emptySchedulerStats(): SchedulerStats {
  return { runs: 0, rows: 0, steps: 0, rowSteps: 0, prefillTokens: 0, reusedTokens: 0, sharedTokens: 0, uncopiedRuns: 0, evictions: 0, turns: 0, generatedTokens: 0, busyMs: 0, rowMs: 0, queueMs: 0, awayMs: 0, returns: 0, admitMs: 0, stalledRowMs: 0 };
}

/**
 * Where the counters come from: one call per event of the engine's loop. Also remembers when each
 * episode's last turn finished, for `awayMs` (episodes do not say when they end: the most recent
 * `episodeLimit` are kept).
 */
export class StatsRecorder {
  readonly stats: SchedulerStats = emptySchedulerStats();
  readonly #lastFinished = new Map<string, number>();
  readonly #episodeLimit: number;

  constructor(episodeLimit: number) {
    this.#episodeLimit = episodeLimit;
  }

  /** A turn arrived at `arrivedMs` (`performance.now()`): counts its episode's time away when its last turn finished here. */
  arrived(cacheKey: string | undefined, arrivedMs: number): void {
    if (cacheKey === undefined) return;
    const finished = this.#lastFinished.get(cacheKey);
    if (finished === undefined) return;
    this.#lastFinished.delete(cacheKey);
    this.stats.awayMs += arrivedMs - finished;
    this.stats.returns++;
  }

  /** A run started at `startedMs`: each row starting its turn in it waited since it arrived (`firstRunArrivals`); `uncopied`: it feeds the resident decode batch. */
  runStarted(startedMs: number, firstRunArrivals: readonly number[], uncopied: boolean): void {
    for (const arrived of firstRunArrivals) this.stats.queueMs += startedMs - arrived;
    if (uncopied) this.stats.uncopiedRuns++;
  }

  /** A run's wall time, whether it succeeded or not. */
  runTimed(rows: number, ms: number): void {
    this.stats.busyMs += ms;
    this.stats.rowMs += rows * ms;
  }

  /** A run that computed `steps` loop iterations over `rows` rows. */
  runDone(rows: number, steps: number): void {
    this.stats.runs++;
    this.stats.rows += rows;
    this.stats.steps += steps;
    this.stats.rowSteps += rows * steps;
  }

  /** A row's first run fed `fed` prompt tokens and took `cached` from a cache (`shared`: a shared prefix). */
  prefilled(fed: number, cached: number, shared: boolean): void {
    this.stats.prefillTokens += fed;
    this.stats.reusedTokens += cached;
    if (shared) this.stats.sharedTokens += cached;
  }

  /** The prefill run(s) of admitted turns took `ms` while `stalledRows` rows waited to decode. */
  admitted(ms: number, stalledRows: number): void {
    this.stats.admitMs += ms;
    this.stats.stalledRowMs += stalledRows * ms;
  }

  evicted(count: number): void {
    this.stats.evictions += count;
  }

  /** A turn returned `tokens` new tokens. */
  finished(cacheKey: string | undefined, tokens: number, nowMs: number): void {
    this.stats.turns++;
    this.stats.generatedTokens += tokens;
    if (cacheKey === undefined) return;
    this.#lastFinished.delete(cacheKey);
    this.#lastFinished.set(cacheKey, nowMs);
    for (const key of this.#lastFinished.keys()) {
      if (this.#lastFinished.size <= this.#episodeLimit) break;
      this.#lastFinished.delete(key);
    }
  }
}
