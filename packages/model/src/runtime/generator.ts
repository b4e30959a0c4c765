import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { createSession, saveModel, sessionRecord, tensor, type BuiltModel, type GraphSession, type SessionConfig, type TensorData } from '@sqlenv/onnx-graph';
import { AppError, ErrorCode } from '@sqlenv/shared';
import type { ModelConfig } from '../io/config.ts';
import { leftPad, loraFeeds, uniformsForSeed } from './batch.ts';
import { buildGenerationGraph, GEN_IO } from '../graphs/generation-graph.ts';
import { IO } from '../graphs/forward-graphs.ts';
import { appendAlong, assembleBatchCache, kvBytesPerToken, RowKvCache } from './kv-cache.ts';
import { loraTensorSpecs, zeroLoraWeights, type LoraConfig, type LoraWeights } from '../graphs/lora.ts';
import type { ModelWeights } from '../io/weights.ts';
import type { ResidentBatch } from './resident-batch.ts';
import { isBigModel, prepackingDecision, weightBytes, type PrepackingDecision } from './prepacking.ts';

/** One sequence to continue. */
export interface GenerationRequest {
  promptIds: readonly number[];
  /** Seeds this row's uniforms: the same seed and prompt give the same tokens in any batch. Default 0. */
  seed?: number;
  /** Softmax temperature; ≤ 0 = greedy. Default 1. */
  temperature?: number;
  /** Nucleus mass in (0, 1]; 1 = off. Default 1. */
  topP?: number;
}

export interface GenerateOptions {
  /** Most new tokens per row (≥ 1). */
  maxNewTokens: number;
  /** Keep the k most likely tokens (0 = off); one value per batch. Default 0. */
  topK?: number;
  /** Ids that end a row (included in its output). Default: the config's eosTokenIds. */
  stopIds?: readonly number[];
  /** Adapter for this run (default: all zeros = the base policy). Ignored by graphs built without LoRA. */
  lora?: LoraWeights;
  /** Pad prompts to at least this width (length bucketing keeps shapes few). */
  padToWidth?: number;
}

export interface GenerationResult {
  /** New token ids, up to and including the stop token. */
  tokens: number[];
  /** log softmax(logits / τ) of each token (what the scoring graph reproduces at temperature τ). */
  logprobs: number[];
  /** Log-probability under the truncated (top-k / top-p) distribution sampled from. */
  sampleLogprobs: number[];
  finishReason: 'stop' | 'length';
}

export interface GeneratorOptions {
  /** Build LoRA inputs into the graph. Default: none. */
  lora?: LoraConfig;
  /**
   * W·xᵀ layout: one copy of the weights in ONNX Runtime instead of two (decoder.ts `linear`).
   * Default false. Prefer `session: { sessionConfig: { 'session.disable_prepacking': '1' } }`, which
   * gives one copy without changing the graph.
   */
  inPlaceWeights?: boolean;
  /**
   * Prompt tokens per prefill iteration (generation-graph.ts; default DEFAULT_PREFILL_CHUNK_TOKENS):
   * bounds the attention workspace of a run by the cache, not the square of the prompt.
   */
  prefillChunkTokens?: number;
  /** ONNX Runtime session settings (default: direct mode, one intra-op thread). */
  session?: SessionConfig;
  /**
   * Turn ONNX Runtime's weight pre-packing off (`session.disable_prepacking`): one copy of each
   * weight instead of a packed one per consuming loop. Default: by the weights' size
   * (`prepackingDecision`: on up to PREPACKING_MAX_WEIGHT_BYTES, off above). An explicit
   * `session.sessionConfig['session.disable_prepacking']` counts as this option.
   */
  disablePrepacking?: boolean;
  /**
   * Write the model (graph, big weights as external data files beside it) to this `.onnx` path and
   * let ONNX Runtime load it from disk: loading from memory briefly holds the weights twice inside
   * ORT on top of the caller's copy (bench/results/generate.md). Use a directory of its own; the
   * files may be deleted once `create` has resolved. Default: load from memory.
   */
  modelFile?: string;
  /**
   * With `modelFile`: empty `weights` once the files are written and collect the float32 arrays
   * before ORT loads the file, so the weights are resident once (ORT's mapping of the file), not
   * twice. The caller's map is left empty and must hold the only references to the arrays. Default false.
   */
  releaseWeights?: boolean;
}

/** One row of a `runRows` call. */
export interface RowInput {
  /** Tokens not yet in `cache` (≥ 1): a whole prompt, the part of it appended since, or the last sampled token. */
  inputIds: readonly number[];
  /** What earlier runs computed for this sequence (default: nothing, a fresh prefill). */
  cache?: RowKvCache;
  /** This row's uniforms for this run's steps (its seed's stream, from the turn's first new token on). */
  uniforms: Float32Array;
  temperature?: number;
  topP?: number;
}

export interface RunRowsOptions extends Omit<GenerateOptions, 'maxNewTokens'> {
  /** Most decode steps of this run (the loop stops earlier when every row has stopped). */
  steps: number;
  /** Return each row's cache after the run. */
  keepCache: boolean;
  /**
   * End the run once at most this many rows are still running (a chunk that ends when some rows stop,
   * so they can leave). Default 0: the run goes on until every row has stopped or `steps`.
   */
  minRunning?: number;
  /**
   * Clear each input's `cache` once the batch feeds are built, so the caches the run no longer needs
   * can be collected while it runs (the caller must hold no other reference). Default false.
   */
  releaseCaches?: boolean;
  /**
   * The resident batch whose rows the inputs' caches are, in its order: its arrays are the run's past
   * as they are and the slots the run adds are written into them. Default: the caches are copied
   * into new batch arrays (`assembleBatchCache`) and each row comes back as a view of the outputs.
   */
  batch?: ResidentBatch;
}

export interface RowOutput {
  /** Sampled ids of this run, up to and including a stop token. */
  tokens: number[];
  logprobs: number[];
  sampleLogprobs: number[];
  /** Whether a stop token ended the row. */
  stopped: boolean;
  /** Loop iterations the run computed (the same for every row of the run). */
  steps: number;
  cache?: RowKvCache;
}

function pick(r: GenerationRequest): Pick<RowInput, 'temperature' | 'topP'> {
  return { ...(r.temperature === undefined ? {} : { temperature: r.temperature }), ...(r.topP === undefined ? {} : { topP: r.topP }) };
}

/** Token ids inside the vocabulary, at least one, top-p in (0, 1]: the errors a caller can fix. */
export function checkRowInput(r: Pick<RowInput, 'inputIds' | 'topP'>, vocabSize: number): void {
  if (r.inputIds.length === 0) throw new AppError(ErrorCode.VALIDATION, 'sequences must not be empty');
  for (const id of r.inputIds) {
    if (!Number.isInteger(id) || id < 0 || id >= vocabSize) {
      throw new AppError(ErrorCode.VALIDATION, `token id ${id} is outside the vocabulary [0, ${vocabSize})`);
    }
  }
  const topP = r.topP ?? 1;
  if (!(topP > 0 && topP <= 1)) throw new AppError(ErrorCode.VALIDATION, `topP must be in (0, 1], got ${topP}`);
}

/**
 * A run with `releaseCaches` whose past cache holds at least this many bytes collects garbage first
 * (`collectReleasedArrays`): at Qwen3-0.6B shapes a released cache is gigabytes, at sqlenv-tiny's a
 * whole batch is a few megabytes and the collection would cost more than it frees.
 */
export const COLLECT_BEFORE_RUN_BYTES = 256 * 2 ** 20;

/**
 * Collect garbage now and give V8 the turns of the event loop it frees array buffers' memory in.
 * Released weights otherwise wait for V8's next major GC, which ORT's native allocations never
 * trigger: the Qwen3-0.6B-shaped generator, once created, still held its 2.4 GB of float32 arrays
 * beside ORT's mapping of the same weights until V8 happened to collect (docs/inference.md, "Memory
 * of a run").
 */
async function collectReleasedArrays(): Promise<void> {
  let gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) {
    // A context created while the flag is set gets `gc`; the flag is reset at once, this context's globals are untouched.
    setFlagsFromString('--expose-gc');
    gc = runInNewContext('gc') as () => void;
    setFlagsFromString('--no-expose-gc');
  }
  // The first collection finds the arrays dead, their backing stores are freed by tasks that run
  // between event-loop turns; a second pass after a turn catches what the first one left.
  for (let pass = 0; pass < 2; pass++) {
    gc();
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/**
 * The generation session's settings: direct mode, the pre-packing decision, and for weights above its
 * threshold no memory pattern (a run's shapes change every time; measured, it saved no time). ORT's
 * CPU arena stays on: without it every intermediate above glibc's mmap threshold (32 MiB: the
 * prefill's attention scores, its full-prompt projections) is fresh memory zeroed page by page, and
 * Qwen3-0.6B-shaped runs took ~3.3× as long (8 × 1,024 prompt tokens: 250 s against 75 s, the same
 * 5.4 GB peak; docs/inference.md, "Memory of a run"). Explicit settings win (`cpuMemArena: false`
 * holds less between runs).
 */
export function generationSessionConfig(prepacking: PrepackingDecision, session: SessionConfig = {}): SessionConfig {
  return {
    mode: 'direct',
    ...(isBigModel(prepacking.weightBytes, prepacking.thresholdBytes) ? { memoryPattern: false } : {}),
    ...session,
    sessionConfig: { ...session.sessionConfig, 'session.disable_prepacking': prepacking.prepacking ? '0' : '1' },
  };
}

/**
 * A model's generation graph in one ORT session: pads a batch, draws each
 * row's uniforms from its seed, runs prefill + in-graph decode loop once,
 * and cuts each row at its stop token.
 */
export class Generator {
  readonly config: ModelConfig;
  readonly lora: LoraConfig | undefined;
  /** Whether ORT pre-packs the weights, and why. */
  readonly prepacking: PrepackingDecision;
  readonly #session: GraphSession;
  readonly #zeroLora: LoraWeights | undefined;

  private constructor(config: ModelConfig, lora: LoraConfig | undefined, session: GraphSession, prepacking: PrepackingDecision) {
    this.config = config;
    this.lora = lora;
    this.prepacking = prepacking;
    this.#session = session;
    this.#zeroLora = lora === undefined ? undefined : zeroLoraWeights(config, lora);
  }

  static async create(config: ModelConfig, weights: ModelWeights, options: GeneratorOptions = {}): Promise<Generator> {
    const build = (): BuiltModel =>
      buildGenerationGraph(config, weights, {
        ...(options.lora === undefined ? {} : { lora: options.lora }),
        ...(options.inPlaceWeights === undefined ? {} : { inPlaceWeights: options.inPlaceWeights }),
        ...(options.prefillChunkTokens === undefined ? {} : { prefillChunkTokens: options.prefillChunkTokens }),
      }).graph.toModel();
    if (options.releaseWeights === true && options.modelFile === undefined) throw new AppError(ErrorCode.VALIDATION, 'releaseWeights needs modelFile');
    // Decided before the weights may be released below.
    const explicit = options.session?.sessionConfig?.['session.disable_prepacking'];
    const prepacking = prepackingDecision(weightBytes(weights), options.disablePrepacking ?? (explicit === undefined ? undefined : explicit === '1'));
    const session = generationSessionConfig(prepacking, options.session);
    // The built graph is not kept in a variable: once written, nothing here references the weights.
    const source = options.modelFile === undefined ? build() : await saveModel(build(), options.modelFile);
    if (options.releaseWeights === true) {
      weights.clear();
      await collectReleasedArrays();
    }
    options.session?.logger?.info({ prepacking }, 'weight pre-packing');
    return new Generator(config, options.lora, await createSession(source, session), prepacking);
  }

  /** Where the generation session runs (provider, threads, node placement), its config entries and the pre-packing decision: what `session created` logs. */
  get sessionRecord(): Record<string, unknown> {
    return { ...sessionRecord(this.#session), sessionConfig: this.#session.config.sessionConfig, prepacking: this.prepacking };
  }

  /** One run per batch: prefill and the whole decode, no cache kept (each row alone would get the same tokens). */
  async generate(requests: readonly GenerationRequest[], options: GenerateOptions): Promise<GenerationResult[]> {
    const N = options.maxNewTokens;
    if (!Number.isInteger(N) || N < 1) throw new AppError(ErrorCode.VALIDATION, `maxNewTokens must be an integer ≥ 1, got ${N}`);
    const rows = await this.runRows(
      requests.map((r) => ({ inputIds: r.promptIds, uniforms: uniformsForSeed(r.seed ?? 0, N), ...pick(r) })),
      { ...options, steps: N, keepCache: false },
    );
    return rows.map(({ tokens, logprobs, sampleLogprobs, stopped }) => ({ tokens, logprobs, sampleLogprobs, finishReason: stopped ? 'stop' : 'length' }));
  }

  /**
   * One run of the generation graph over rows that may carry a cache: each row
   * feeds its not-yet-cached tokens (left-padded), then decodes up to `steps`
   * tokens with its own uniforms. With `keepCache` each row comes back with its
   * compacted cache (every slot fed: the inputs and all but the last sampled token).
   */
  async runRows(rows: readonly RowInput[], options: RunRowsOptions): Promise<RowOutput[]> {
    const N = options.steps;
    if (!Number.isInteger(N) || N < 1) throw new AppError(ErrorCode.VALIDATION, `steps must be an integer ≥ 1, got ${N}`);
    const B = rows.length;
    const stopIds = options.stopIds ?? this.config.eosTokenIds;
    for (const r of rows) checkRowInput(r, this.config.vocabSize);
    const batch = leftPad(
      rows.map((r) => r.inputIds),
      this.config.padTokenId,
      options.padToWidth,
    );
    const uniforms = new Float32Array(B * N);
    // A row with fewer uniforms than steps (its own token budget ends inside the run) reads zeros past them:
    // those tokens are cut by the caller.
    rows.forEach((r, b) => uniforms.set(r.uniforms.subarray(0, N), b * N));
    const resident = options.batch;
    if (resident !== undefined && !resident.holdsExactly(rows.map((r) => r.cache))) throw new AppError(ErrorCode.INTERNAL, 'a run over a resident batch must feed exactly its rows, in its order');
    const past = resident?.feeds() ?? assembleBatchCache(this.config, rows.map((r) => r.cache));
    if (options.releaseCaches === true) {
      for (const r of rows) delete (r as { cache?: RowKvCache }).cache;
      // Caches released since the last collection (earlier runs' outputs, compacted copies) would stay
      // resident beside this run's until V8 happens to collect: with a large past, collect them first.
      const pastT = past[GEN_IO.pastMask] as TensorData;
      if ((pastT.dims[0] as number) * (pastT.dims[1] as number) * kvBytesPerToken(this.config) >= COLLECT_BEFORE_RUN_BYTES) await collectReleasedArrays();
    }
    const feeds: Record<string, TensorData> = {
      [IO.inputIds]: batch.ids,
      [IO.attentionMask]: batch.mask,
      ...past,
      [GEN_IO.uniforms]: tensor('float32', [B, N], uniforms),
      [GEN_IO.temperature]: tensor('float32', [B], rows.map((r) => r.temperature ?? 1)),
      [GEN_IO.topP]: tensor('float32', [B], rows.map((r) => r.topP ?? 1)),
      [GEN_IO.topK]: tensor('int64', [], [options.topK ?? 0]),
      // An id no token has keeps the stop list non-empty (the graph reduces over it).
      [GEN_IO.stopIds]: tensor('int64', [Math.max(1, stopIds.length)], stopIds.length > 0 ? stopIds : [-1]),
      [GEN_IO.keepCache]: tensor('bool', [], [options.keepCache]),
      [GEN_IO.minRunning]: tensor('int64', [], [options.minRunning ?? 0]),
      ...this.#loraFeeds(options.lora),
    };
    // `feeds` holds the past now: after the run it becomes the cache layer by layer (#appendToPast).
    for (const name of Object.keys(past)) delete past[name];
    const wanted: string[] = [GEN_IO.tokens, GEN_IO.logprobs, GEN_IO.sampleLogprobs];
    if (options.keepCache) {
      wanted.push(GEN_IO.presentMask);
      for (let i = 0; i < this.config.numLayers; i++) wanted.push(GEN_IO.presentKey(i), GEN_IO.presentValue(i));
    }
    const out = await this.#session.run(feeds, { outputs: wanted });
    if (options.keepCache && resident !== undefined) resident.append(out);
    else if (options.keepCache) await this.#appendToPast(feeds, out);
    const tokensT = out[GEN_IO.tokens] as TensorData;
    const width = tokensT.dims[1] as number;
    const tokens = tokensT.data as BigInt64Array;
    const logprobs = (out[GEN_IO.logprobs] as TensorData).data as Float32Array;
    const sampleLogprobs = (out[GEN_IO.sampleLogprobs] as TensorData).data as Float32Array;
    const stops = new Set(stopIds);
    return rows.map((_, b) => {
      const result: RowOutput = { tokens: [], logprobs: [], sampleLogprobs: [], stopped: false, steps: width };
      for (let t = 0; t < width; t++) {
        const id = Number(tokens[b * width + t]);
        result.tokens.push(id);
        result.logprobs.push(logprobs[b * width + t] as number);
        result.sampleLogprobs.push(sampleLogprobs[b * width + t] as number);
        if (stops.has(id)) {
          result.stopped = true;
          break;
        }
      }
      if (options.keepCache) result.cache = resident === undefined ? RowKvCache.ofOutputs(this.config, out, b) : resident.row(b);
      return result;
    });
  }

  /**
   * Turn a run's outputs (the slots it added) into the whole cache after it, in place: per layer the
   * past feed with the added slots appended (`appendAlong`), the past's reference dropped as soon as
   * its layer is done. With a big past, released layers are collected along the way, so the cache is
   * held about once more than the past instead of twice (docs/inference.md, "Memory of a run").
   */
  async #appendToPast(feeds: Record<string, TensorData>, out: Record<string, TensorData>): Promise<void> {
    const pastMask = feeds[GEN_IO.pastMask] as TensorData;
    const pastBytes = (pastMask.dims[0] as number) * (pastMask.dims[1] as number) * kvBytesPerToken(this.config);
    const collectEvery = pastBytes >= COLLECT_BEFORE_RUN_BYTES ? Math.max(COLLECT_BEFORE_RUN_BYTES, pastBytes / 4) : Number.POSITIVE_INFINITY;
    let released = 0;
    out[GEN_IO.presentMask] = appendAlong(pastMask, out[GEN_IO.presentMask] as TensorData, 1);
    for (let i = 0; i < this.config.numLayers; i++) {
      for (const [pastName, presentName] of [
        [GEN_IO.pastKey(i), GEN_IO.presentKey(i)],
        [GEN_IO.pastValue(i), GEN_IO.presentValue(i)],
      ] as const) {
        const past = feeds[pastName] as TensorData;
        out[presentName] = appendAlong(past, out[presentName] as TensorData, 2);
        delete feeds[pastName];
        released += (past.data as Float32Array).byteLength;
      }
      if (released >= collectEvery) {
        released = 0;
        await collectReleasedArrays();
      }
    }
  }

  #loraFeeds(weights: LoraWeights | undefined): Record<string, TensorData> {
    if (this.lora === undefined) {
      if (weights !== undefined) throw new AppError(ErrorCode.VALIDATION, 'this generator was built without LoRA inputs');
      return {};
    }
    return loraFeeds(loraTensorSpecs(this.config, this.lora), weights ?? (this.#zeroLora as LoraWeights));
  }

  async close(): Promise<void> {
    await this.#session.close();
  }
}
