import { createSession, saveModel, tensor, type BuiltModel, type GraphSession, type SessionConfig, type TensorData } from '@sqlenv/onnx-graph';
import { AppError, ErrorCode } from '@sqlenv/shared';
import type { ModelConfig } from './config.ts';
import { leftPad, loraFeeds, uniformsForSeed } from './batch.ts';
import { buildGenerationGraph, GEN_IO } from './generation-graph.ts';
import { IO } from './forward-graphs.ts';
import { loraTensorSpecs, zeroLoraWeights, type LoraConfig, type LoraWeights } from './lora.ts';
import type { ModelWeights } from './weights.ts';

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
   * Write the model (graph, big weights as external data files beside it) to this `.onnx` path and
   * let ONNX Runtime load it from disk: loading from memory briefly holds the weights twice inside
   * ORT on top of the caller's copy (bench/results/generate.md). Use a directory of its own; the
   * files may be deleted once `create` has resolved. Default: load from memory.
   */
  modelFile?: string;
  /**
   * With `modelFile`: empty `weights` once the files are written, so the float32 arrays can be
   * collected (at V8's next major GC) while ORT holds its copy (the caller's map is left empty). Default false.
   */
  releaseWeights?: boolean;
}

/**
 * A model's generation graph in one ORT session: pads a batch, draws each
 * row's uniforms from its seed, runs prefill + in-graph decode loop once,
 * and cuts each row at its stop token.
 */
export class Generator {
  readonly config: ModelConfig;
  readonly lora: LoraConfig | undefined;
  readonly #session: GraphSession;
  readonly #zeroLora: LoraWeights | undefined;

  private constructor(config: ModelConfig, lora: LoraConfig | undefined, session: GraphSession) {
    this.config = config;
    this.lora = lora;
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
    // The built graph is not kept in a variable: once written, nothing here references the weights.
    const source = options.modelFile === undefined ? build() : await saveModel(build(), options.modelFile);
    if (options.releaseWeights === true) weights.clear();
    const session = await createSession(source, { mode: 'direct', ...options.session });
    return new Generator(config, options.lora, session);
  }

  async generate(requests: readonly GenerationRequest[], options: GenerateOptions): Promise<GenerationResult[]> {
    const N = options.maxNewTokens;
    if (!Number.isInteger(N) || N < 1) throw new AppError(ErrorCode.VALIDATION, `maxNewTokens must be an integer ≥ 1, got ${N}`);
    const B = requests.length;
    const stopIds = options.stopIds ?? this.config.eosTokenIds;
    for (const r of requests) {
      for (const id of r.promptIds) {
        if (!Number.isInteger(id) || id < 0 || id >= this.config.vocabSize) {
          throw new AppError(ErrorCode.VALIDATION, `token id ${id} is outside the vocabulary [0, ${this.config.vocabSize})`);
        }
      }
      const topP = r.topP ?? 1;
      if (!(topP > 0 && topP <= 1)) throw new AppError(ErrorCode.VALIDATION, `topP must be in (0, 1], got ${topP}`);
    }
    const batch = leftPad(
      requests.map((r) => r.promptIds),
      this.config.padTokenId,
      options.padToWidth,
    );
    const uniforms = new Float32Array(B * N);
    requests.forEach((r, b) => uniforms.set(uniformsForSeed(r.seed ?? 0, N), b * N));
    const feeds: Record<string, TensorData> = {
      [IO.inputIds]: batch.ids,
      [IO.attentionMask]: batch.mask,
      [GEN_IO.uniforms]: tensor('float32', [B, N], uniforms),
      [GEN_IO.temperature]: tensor('float32', [B], requests.map((r) => r.temperature ?? 1)),
      [GEN_IO.topP]: tensor('float32', [B], requests.map((r) => r.topP ?? 1)),
      [GEN_IO.topK]: tensor('int64', [], [options.topK ?? 0]),
      // An id no token has keeps the stop list non-empty (the graph reduces over it).
      [GEN_IO.stopIds]: tensor('int64', [Math.max(1, stopIds.length)], stopIds.length > 0 ? stopIds : [-1]),
      ...this.#loraFeeds(options.lora),
    };
    const out = await this.#session.run<'tokens' | 'logprobs' | 'sample_logprobs'>(feeds);
    const width = out.tokens.dims[1] as number;
    const tokens = out.tokens.data as BigInt64Array;
    const logprobs = out.logprobs.data as Float32Array;
    const sampleLogprobs = out.sample_logprobs.data as Float32Array;
    const stops = new Set(stopIds);
    return requests.map((_, b) => {
      const result: GenerationResult = { tokens: [], logprobs: [], sampleLogprobs: [], finishReason: 'length' };
      for (let t = 0; t < width; t++) {
        const id = Number(tokens[b * width + t]);
        result.tokens.push(id);
        result.logprobs.push(logprobs[b * width + t] as number);
        result.sampleLogprobs.push(sampleLogprobs[b * width + t] as number);
        if (stops.has(id)) {
          result.finishReason = 'stop';
          break;
        }
      }
      return result;
    });
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
