import { AppError, ErrorCode, maxOf } from '@sqlenv/shared';
import type { LoraWeights } from '../graphs/lora.ts';
import type { SchedulerPolicy } from './engine-options.ts';
import type { Generator, GenerationRequest, GenerationResult, RowInput, RowOutput } from './generator.ts';
import type { RowKvCache } from './kv-cache.ts';
import type { ResidentBatch } from './resident-batch.ts';
import type { StatsRecorder } from './scheduler-stats.ts';

/** One turn of an episode: a prompt to continue. */
export interface TurnRequest extends GenerationRequest {
  /** Most new tokens for this turn. */
  maxNewTokens: number;
  /**
   * The episode this turn belongs to: its cache is kept after the turn and continued by the next
   * turn with the same key whose prompt extends it. Default: nothing kept.
   */
  cacheKey?: string;
}

export interface TurnResult extends GenerationResult {
  /** The adapter version the turn was sampled with (0 = the initial adapter). */
  policyVersion: number;
}

/** The evaluation lane a turn comes from (deterministic engines): the lane's id and the turn's order key (its episode's index). */
export interface TurnLane {
  id: number;
  order: number;
}

/** A submitted turn, waiting or running. */
export interface Turn {
  request: TurnRequest;
  /** Swaps requested before this turn arrived: it runs under the adapter they leave. */
  epoch: number;
  uniforms: Float32Array;
  /** `performance.now()` when it arrived. */
  arrivedMs: number;
  /** Its evaluation lane (deterministic engines). */
  lane?: TurnLane | undefined;
  /** The loop iteration it arrived in (lane turns are admitted by iteration, then order key). */
  stamp: number;
  resolve: (result: TurnResult) => void;
  reject: (error: AppError) => void;
}

/** An admitted turn: what it has generated and the cache of what has been fed. */
export interface Row {
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
  /** The adapter generation it runs under from start to end, and its tensors. */
  generation: number;
  lora: LoraWeights | undefined;
  /** A stop token was sampled (possibly past the turn's own budget). */
  stopped: boolean;
  /** Its run failed and the turn was rejected. */
  failed: boolean;
}

/**
 * Runs rows through the generator and applies each run's outputs to them: their tokens, log-probs
 * and caches, and the run's counters.
 */
export class Executor {
  readonly #generator: Generator;
  readonly #policy: SchedulerPolicy;
  readonly #stats: StatsRecorder;

  constructor(generator: Generator, policy: SchedulerPolicy, stats: StatsRecorder) {
    this.#generator = generator;
    this.#policy = policy;
    this.#stats = stats;
  }

  /**
   * One run of `rows` (one adapter generation) for up to `steps` steps; `batch`: the resident decode
   * batch the rows' caches are, in its order. A failed run rejects its turns and marks its rows failed.
   */
  async run(rows: readonly Row[], steps: number, batch?: ResidentBatch): Promise<void> {
    const policy = this.#policy;
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
    const widest = maxOf(inputs.map((r) => r.inputIds.length), 0);
    const continuous = policy.batching === 'continuous';
    const lora = rows[0]?.lora;
    // The run owns the caches now: it lets go of them once its feeds are built (a failed run fails its turns anyway).
    for (const r of rows) r.cache = undefined;
    const started = performance.now();
    this.#stats.runStarted(
      started,
      rows.filter((r) => r.generated.tokens.length === 0).map((r) => r.turn.arrivedMs),
      batch !== undefined,
    );
    let outputs: RowOutput[];
    try {
      outputs = await this.#generator.runRows(inputs, {
        steps,
        // Within a turn the cache always crosses chunks; between turns only with reuseKv.
        keepCache: policy.reuseKv || continuous,
        releaseCaches: true,
        topK: policy.topK,
        stopIds: policy.stopIds,
        ...(continuous ? { minRunning: rows.length - Math.max(1, Math.ceil(rows.length * policy.chunkStopShare)) } : {}),
        ...(lora === undefined ? {} : { lora }),
        ...(widest > 1 ? { padToWidth: Math.ceil(widest / policy.lengthBucketTokens) * policy.lengthBucketTokens } : {}),
        ...(batch === undefined ? {} : { batch }),
      });
    } catch (error) {
      const appError = error instanceof AppError ? error : new AppError(ErrorCode.RUNTIME, String(error), { cause: error });
      for (const r of rows) {
        r.turn.reject(appError);
        r.failed = true;
      }
      return;
    } finally {
      this.#stats.runTimed(rows.length, performance.now() - started);
    }
    this.#apply(rows, inputs, outputs);
  }

  #apply(rows: readonly Row[], inputs: readonly RowInput[], outputs: readonly RowOutput[]): void {
    const computed = outputs[0]?.steps ?? 0;
    this.#stats.runDone(rows.length, computed);
    rows.forEach((r, b) => {
      const out = outputs[b] as RowOutput;
      const fed = inputs[b]?.inputIds.length ?? 0;
      if (r.generated.tokens.length === 0) this.#stats.prefilled(fed, r.cachedLength, r.source === 'shared');
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
}

/** A finished row's result, cut at its own budget (a row may decode past it when its batch-mates needed more steps: rows are independent, so this is exact). */
export function turnResult(row: Row): TurnResult {
  const { maxNewTokens } = row.turn.request;
  const produced = row.generated.tokens.length;
  return {
    tokens: row.generated.tokens.slice(0, maxNewTokens),
    logprobs: row.generated.logprobs.slice(0, maxNewTokens),
    sampleLogprobs: row.generated.sampleLogprobs.slice(0, maxNewTokens),
    finishReason: row.stopped && produced <= maxNewTokens ? 'stop' : 'length',
    policyVersion: row.policyVersion,
  };
}
