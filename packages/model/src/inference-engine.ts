import type { Worker } from 'node:worker_threads';
import { z } from 'zod';
import { AppError, ErrorCode, formatZodIssues, silentLogger, startWorker, type Logger } from '@sqlenv/shared';
import type { EngineReply, EngineRequest, EngineWorkerSetup } from './engine-worker.ts';
import { DEFAULT_PREFILL_CHUNK_TOKENS } from './generation-graph.ts';
import type { GenerationRequest, GenerationResult } from './generator.ts';
import { loraConfigSchema, type LoraWeights } from './lora.ts';

/**
 * Batches the pending turns of many concurrent episodes into one generation
 * run. Episodes call `generate()` independently; whatever is pending when the
 * worker thread is free goes out as one left-padded batch (FIFO, up to
 * `maxBatchSize`), its prompts padded to a multiple of `lengthBucketTokens`
 * so the session sees few distinct shapes. Each row draws its own uniforms
 * from its own seed, so a turn's tokens do not depend on its batch-mates.
 */
export const engineOptionsSchema = z.object({
  /** Checkpoint directory (config.json + safetensors), loaded inside the worker thread. */
  modelDir: z.string().min(1),
  /** Build LoRA inputs (rank, alpha, targets); default: no adapter support. */
  lora: loraConfigSchema.optional(),
  /** Most rows per run. Default 32. */
  maxBatchSize: z.number().int().positive().default(32),
  /** After the first request arrives at an idle engine, wait this long for more. Default 2 ms. */
  batchWindowMs: z.number().nonnegative().default(2),
  /** Prompt widths are rounded up to a multiple of this. Default 32 tokens. */
  lengthBucketTokens: z.number().int().positive().default(32),
  /**
   * Bound on one run's prefill attention scores, (rows × heads × min(C, width) × width) float32 values,
   * in bytes, C the generation graph's prefill chunk (DEFAULT_PREFILL_CHUNK_TOKENS). The prefill
   * materialises that tensor (and a few of its size) per layer; estimateGenerationMemory
   * (attention-memory.ts) gives the whole run's cache and workspace. Pending turns are taken in order
   * while the next one still fits (one always goes). Default 256 MiB.
   */
  maxPrefillScoresBytes: z.number().int().positive().default(256 * 1024 * 1024),
  /** top-k for every run (0 = off). Default 0. */
  topK: z.number().int().nonnegative().default(0),
  /** Stop ids; default: the checkpoint's eos_token_id. */
  stopIds: z.array(z.number().int().nonnegative()).optional(),
  /**
   * One copy of the weights in ONNX Runtime instead of the original plus a pre-packed one
   * (ORT `session.disable_prepacking`): for models near the memory limit; pre-packing speeds up larger
   * GEMMs (prefill, big batches), not one-row decoding. Default false.
   */
  disablePrepacking: z.boolean().default(false),
  /**
   * Load the session through a model file in a temporary directory (removed once loaded) and release
   * the float32 weights first (`Generator` `modelFile` + `releaseWeights`): ORT maps the file instead of
   * loading from memory. Costs writing the weights to disk once. Default false.
   */
  loadViaFile: z.boolean().default(false),
  /** The older way to one weight copy (W·xᵀ layout, decoder.ts `linear`); prefer `disablePrepacking`. Default false. */
  inPlaceWeights: z.boolean().default(false),
  /** ORT threads inside one op. Default 1. */
  intraOpThreads: z.number().int().positive().default(1),
});
export type InferenceEngineOptions = z.input<typeof engineOptionsSchema>;

export interface TurnRequest extends GenerationRequest {
  /** Most new tokens for this turn. */
  maxNewTokens: number;
}

export interface TurnResult extends GenerationResult {
  /** The adapter version the turn was sampled with (0 = the initial adapter). */
  policyVersion: number;
}

interface Pending {
  request: TurnRequest;
  resolve: (result: TurnResult) => void;
  reject: (error: AppError) => void;
}

export interface EngineStats {
  runs: number;
  rows: number;
  /** Rows per run, averaged. */
  meanBatchSize: number;
  /** New tokens returned to callers (after each row's own max-new-tokens cut). */
  generatedTokens: number;
  /** Wall time with a batch in flight on the worker thread, in milliseconds. */
  busyMs: number;
}

export class InferenceEngine {
  readonly vocabSize: number;
  readonly #worker: Worker;
  readonly #options: z.output<typeof engineOptionsSchema>;
  readonly #stopIds: number[];
  readonly #numHeads: number;
  readonly #log: Logger;
  readonly #pending: Pending[] = [];
  readonly #calls = new Map<number, { resolve: (reply: EngineReply) => void; reject: (error: AppError) => void }>();
  #nextId = 0;
  #busy = false;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #closed = false;
  #crashed: AppError | undefined;
  #policyVersion = 0;
  #runs = 0;
  #rows = 0;
  #generatedTokens = 0;
  #busyMs = 0;

  private constructor(worker: Worker, options: z.output<typeof engineOptionsSchema>, ready: Extract<EngineReply, { type: 'ready' }>, log: Logger) {
    this.#worker = worker;
    this.#options = options;
    this.vocabSize = ready.vocabSize;
    this.#stopIds = options.stopIds ?? ready.eosTokenIds;
    this.#numHeads = ready.numHeads;
    this.#log = log;
    worker.on('message', (reply: EngineReply) => {
      if (reply.type !== 'done' && reply.type !== 'error') return;
      const call = this.#calls.get(reply.id);
      this.#calls.delete(reply.id);
      if (reply.type === 'error') call?.reject(new AppError(reply.code, reply.message));
      else call?.resolve(reply);
    });
    const fail = (error: AppError): void => {
      if (this.#closed) return;
      this.#crashed = error;
      this.#log.error({ err: error }, 'inference worker died');
      for (const call of this.#calls.values()) call.reject(error);
      this.#calls.clear();
      for (const p of this.#pending.splice(0)) p.reject(error);
    };
    worker.on('error', (e) => fail(new AppError(ErrorCode.EXECUTOR_CRASHED, `inference worker failed: ${e.message}`, { cause: e })));
    worker.on('exit', (code) => fail(new AppError(ErrorCode.EXECUTOR_CRASHED, `inference worker exited with code ${code}`)));
  }

  /** Start the worker thread, load the checkpoint there and build the generation session. */
  static async start(input: InferenceEngineOptions, logger: Logger = silentLogger): Promise<InferenceEngine> {
    const parsed = engineOptionsSchema.safeParse(input);
    if (!parsed.success) throw new AppError(ErrorCode.VALIDATION, `invalid inference engine options: ${formatZodIssues(parsed.error)}`);
    const options = parsed.data;
    const setup: EngineWorkerSetup = {
      modelDir: options.modelDir,
      lora: options.lora,
      inPlaceWeights: options.inPlaceWeights,
      loadViaFile: options.loadViaFile,
      session: {
        intraOpThreads: options.intraOpThreads,
        ...(options.disablePrepacking ? { sessionConfig: { 'session.disable_prepacking': '1' } } : {}),
      },
    };
    const worker = startWorker(new URL('./engine-worker.ts', import.meta.url), { data: setup });
    // Listeners are removed one by one: removeAllListeners() would also drop the Worker's
    // internal ones, after which replies sat undelivered until the worker exited.
    let onMessage: ((reply: EngineReply) => void) | undefined;
    let onError: ((e: Error) => void) | undefined;
    const ready = await new Promise<Extract<EngineReply, { type: 'ready' }>>((resolve, reject) => {
      onMessage = (reply) => {
        if (reply.type === 'ready') resolve(reply);
        else reject(new AppError(ErrorCode.MODEL, reply.type === 'init-error' ? reply.message : `unexpected ${reply.type}`));
      };
      onError = (e) => reject(new AppError(ErrorCode.EXECUTOR_CRASHED, `inference worker failed to start: ${e.message}`, { cause: e }));
      worker.once('message', onMessage);
      worker.once('error', onError);
    }).catch(async (error: unknown) => {
      await worker.terminate();
      throw error;
    });
    if (onMessage !== undefined) worker.off('message', onMessage);
    if (onError !== undefined) worker.off('error', onError);
    return new InferenceEngine(worker, options, ready, logger.child({ component: 'inference-engine' }));
  }

  /** The newest version the worker thread has acknowledged (turns carry their own, exact one). */
  get policyVersion(): number {
    return this.#policyVersion;
  }

  get stats(): EngineStats {
    return {
      runs: this.#runs,
      rows: this.#rows,
      meanBatchSize: this.#runs === 0 ? 0 : this.#rows / this.#runs,
      generatedTokens: this.#generatedTokens,
      busyMs: this.#busyMs,
    };
  }

  /** Queue one turn; resolves when its batch has run. */
  generate(request: TurnRequest): Promise<TurnResult> {
    if (this.#closed) return Promise.reject(new AppError(ErrorCode.ABORTED, 'the inference engine is closed'));
    if (this.#crashed !== undefined) return Promise.reject(this.#crashed);
    if (!Number.isInteger(request.maxNewTokens) || request.maxNewTokens < 1) {
      return Promise.reject(new AppError(ErrorCode.VALIDATION, `maxNewTokens must be an integer ≥ 1, got ${request.maxNewTokens}`));
    }
    return new Promise<TurnResult>((resolve, reject) => {
      this.#pending.push({ request, resolve, reject });
      this.#schedule();
    });
  }

  /**
   * Swap the adapter (a new policy version); `null` keeps the current tensors and
   * only moves the version (a trainer that published no weights). Batches already
   * posted to the worker finish with the old adapter; later ones use the new one.
   * Every result carries the version the worker thread actually sampled it with
   * (the worker echoes it), so a batch posted while the swap is in flight is
   * never tagged with the wrong version.
   */
  async setLora(weights: LoraWeights | null, version: number): Promise<void> {
    if (!Number.isInteger(version) || version < 0) throw new AppError(ErrorCode.VALIDATION, `policy version must be an integer ≥ 0, got ${version}`);
    let copy: Record<string, Float32Array> | null = null;
    if (weights !== null) {
      copy = {};
      for (const [name, values] of weights) copy[name] = values;
    }
    const reply = await this.#call({ type: 'set-lora', id: this.#nextId++, weights: copy, version });
    if (reply.type === 'done') this.#policyVersion = Math.max(this.#policyVersion, reply.policyVersion);
  }

  #schedule(): void {
    if (this.#busy || this.#timer !== undefined || this.#pending.length === 0) return;
    if (this.#pending.length >= this.#options.maxBatchSize || this.#batchLength(this.#options.lengthBucketTokens) < this.#pending.length || this.#options.batchWindowMs === 0) {
      void this.#runBatch();
      return;
    }
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.#runBatch();
    }, this.#options.batchWindowMs);
  }

  async #runBatch(): Promise<void> {
    if (this.#busy || this.#pending.length === 0) return;
    this.#busy = true;
    const bucket = this.#options.lengthBucketTokens;
    const batch = this.#pending.splice(0, this.#batchLength(bucket));
    const longest = Math.max(...batch.map((p) => p.request.promptIds.length));
    const maxNewTokens = Math.max(...batch.map((p) => p.request.maxNewTokens));
    const started = performance.now();
    try {
      const reply = await this.#call({
        type: 'generate',
        id: this.#nextId++,
        requests: batch.map(({ request }) => ({
          promptIds: [...request.promptIds],
          ...(request.seed === undefined ? {} : { seed: request.seed }),
          ...(request.temperature === undefined ? {} : { temperature: request.temperature }),
          ...(request.topP === undefined ? {} : { topP: request.topP }),
        })),
        options: { maxNewTokens, topK: this.#options.topK, stopIds: this.#stopIds, padToWidth: Math.ceil(longest / bucket) * bucket },
      });
      this.#runs++;
      this.#rows += batch.length;
      this.#busyMs += performance.now() - started;
      if (reply.type !== 'done') throw new AppError(ErrorCode.INTERNAL, `unexpected ${reply.type} reply from the inference worker`);
      const results = reply.results ?? [];
      const version = reply.policyVersion;
      batch.forEach((p, i) => {
        const r = results[i];
        if (r === undefined) {
          p.reject(new AppError(ErrorCode.INTERNAL, 'the inference worker returned fewer results than requests'));
          return;
        }
        const cut = truncate(r, p.request.maxNewTokens);
        this.#generatedTokens += cut.tokens.length;
        p.resolve({ ...cut, policyVersion: version });
      });
    } catch (error) {
      const appError = error instanceof AppError ? error : new AppError(ErrorCode.RUNTIME, String(error), { cause: error });
      for (const p of batch) p.reject(appError);
    } finally {
      this.#busy = false;
      this.#schedule();
    }
  }

  /** How many pending turns the next run takes: FIFO, up to maxBatchSize and the prefill memory bound. */
  #batchLength(bucket: number): number {
    const limit = Math.min(this.#pending.length, this.#options.maxBatchSize);
    let longest = 0;
    for (let n = 0; n < limit; n++) {
      longest = Math.max(longest, (this.#pending[n] as Pending).request.promptIds.length);
      const width = Math.ceil(longest / bucket) * bucket;
      // The generation graph prefills in chunks: its widest scores are (rows, heads, min(C, width), width).
      const bytes = (n + 1) * this.#numHeads * Math.min(DEFAULT_PREFILL_CHUNK_TOKENS, width) * width * 4;
      if (n > 0 && bytes > this.#options.maxPrefillScoresBytes) return n;
    }
    return limit;
  }

  #call(request: EngineRequest): Promise<EngineReply> {
    if (this.#crashed !== undefined) return Promise.reject(this.#crashed);
    return new Promise((resolve, reject) => {
      this.#calls.set(request.id, { resolve, reject });
      this.#worker.postMessage(request);
    });
  }

  /** Stop the worker; pending turns fail with ABORTED. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    const aborted = new AppError(ErrorCode.ABORTED, 'the inference engine was closed');
    for (const p of this.#pending.splice(0)) p.reject(aborted);
    for (const call of this.#calls.values()) call.reject(aborted);
    this.#calls.clear();
    await this.#worker.terminate();
  }
}

/** A row generated for a longer batch, cut to its own token budget (rows are independent, so this is exact). */
function truncate(result: GenerationResult, maxNewTokens: number): GenerationResult {
  if (result.tokens.length <= maxNewTokens) return result;
  return {
    tokens: result.tokens.slice(0, maxNewTokens),
    logprobs: result.logprobs.slice(0, maxNewTokens),
    sampleLogprobs: result.sampleLogprobs.slice(0, maxNewTokens),
    finishReason: 'length',
  };
}
