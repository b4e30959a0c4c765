import type { Worker } from 'node:worker_threads';
import { z } from 'zod';
import { PROVIDERS } from '@sqlenv/onnx-graph';
import { AppError, ErrorCode, formatZodIssues, minOf, silentLogger, startRpcWorker, WorkerRpc, type Logger } from '@sqlenv/shared';
import type { EngineReply, EngineRequest, EngineWorkerSetup } from './engine-worker.ts';
import type { GenerationRequest, GenerationResult } from './generator.ts';
import { loraConfigSchema, type LoraWeights } from '../graphs/lora.ts';
import { emptySchedulerStats, type SchedulerStats } from './turn-scheduler.ts';

/**
 * Serves the turns of many concurrent episodes from one worker thread.
 * Episodes call `generate()` independently; the worker's scheduler
 * (turn-scheduler.ts) batches them continuously: turns join and leave between
 * decode chunks of `chunkSteps` steps, and each episode's KV cache is kept
 * between its turns (`cacheKey`), so a turn prefills only the tokens appended
 * since the last. Prompts are padded to a multiple of `lengthBucketTokens` so
 * the session sees few distinct shapes. Each row draws its own uniforms from
 * its own seed, so a turn's tokens do not depend on its batch-mates, on the
 * chunking, or on whether its cache was reused (docs/inference.md).
 */
export const engineOptionsSchema = z.object({
  /** Checkpoint directory (config.json + safetensors), loaded inside the worker thread. */
  modelDir: z.string().min(1),
  /** Build LoRA inputs (rank, alpha, targets); default: no adapter support. */
  lora: loraConfigSchema.optional(),
  /** Most rows per run. Default 32. */
  maxBatchSize: z.number().int().positive().default(32),
  /**
   * Keep each episode's KV cache between its turns (requests carry `cacheKey`), so the next turn
   * prefills only the tokens appended since. Default: per execution provider
   * (`turnSchedulingDefaults`): on for the CPU, where the cache stays in host memory, and for WebGPU
   * (measured faster than re-prefilling there); off on CUDA, where the whole turn's loop keeps the
   * cache on the device and a re-prefill costs about what moving it would (docs/inference.md).
   */
  reuseKv: z.boolean().optional(),
  /**
   * With `reuseKv`: a turn without a cache of its own (an episode's first turn) starts from the
   * longest kept prompt prefix it shares with an earlier turn (the system prompt, a GRPO group's
   * first prompt) and prefills only the rest (docs/inference.md). Default: on where `reuseKv` is.
   */
  sharePrefixes: z.boolean().optional(),
  /**
   * Decode steps per run: between runs finished turns leave and waiting turns join (continuous
   * batching). `Infinity`: static batches, a run lasts until its longest row stops and no turn
   * joins meanwhile. Default: per execution provider (`turnSchedulingDefaults`): 32 on the CPU, where
   * a run also ends once a quarter of its rows has stopped (`chunkStopShare`).
   */
  chunkSteps: z.union([z.number().int().positive(), z.literal(Infinity)]).optional(),
  /**
   * Bound on KV cache memory, in bytes: active turns (reserved at prompt + max new tokens) plus the
   * caches parked between turns and the shared prompt prefixes (least recently used dropped first). A turn that alone exceeds it
   * still runs, by itself. Default 4 GiB (Qwen3-0.6B: 224 KiB per token, 8 turns of 2,300 tokens).
   */
  kvCacheBytes: z.number().int().positive().default(4 * 1024 * 1024 * 1024),
  /** After the first request arrives at an idle engine, wait this long for more. Default 2 ms. */
  batchWindowMs: z.number().nonnegative().default(2),
  /**
   * Continuous batching: after a run from which turns finished, wait up to this long for those
   * episodes' next turns (their environment step) before the next decode chunk, bounded also by half
   * the last iteration's time. 0 (the default) turns it off: on the 2-core development machine it
   * raised the mean batch at 32 in flight from 19 to 25 but lowered episodes/s by 8–16 %
   * (bench/results/rollout-llm-return-wait.md, docs/inference.md).
   */
  returnWaitMs: z.number().nonnegative().default(0),
  /**
   * Continuous batching: keep the decode batch's KV cache in place between chunks, with room for
   * the slots the next chunks add, so a chunk copies only its new slots and the rows that joined,
   * not every row's cache (resident-batch.ts, docs/inference.md). Default true.
   */
  residentBatch: z.boolean().default(true),
  /**
   * Continuous batching: a decode run ends early once this share of its rows has stopped (at least
   * one), so finished turns leave and waiting ones join without waiting for the chunk's last step;
   * the rows still running continue in the next run. 1: a run ends only when all its rows have
   * stopped or after `chunkSteps` steps. Default: per execution provider (`turnSchedulingDefaults`):
   * 0.25 on the CPU.
   */
  chunkStopShare: z.number().gt(0).lte(1).optional(),
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
   * Turn ONNX Runtime's weight pre-packing off (`session.disable_prepacking`): one copy of each
   * weight instead of the original plus a packed one per consuming loop of the generation graph.
   * Pre-packing speeds up the GEMMs of small models and costs big ones gigabytes. Default: by the
   * weights' size (`prepackingDecision`, prepacking.ts: on up to 1 GiB of float32 weights, off
   * above); the decision is in the `session created` log line (`prepacking`).
   */
  disablePrepacking: z.boolean().optional(),
  /**
   * Load the session through a model file in a temporary directory (removed once loaded) and release
   * the float32 weights first (`Generator` `modelFile` + `releaseWeights`): ORT maps the file instead of
   * loading from memory. Costs writing the weights to disk once. Default: by the weights' size, on above
   * the pre-packing threshold (1 GiB of float32: Qwen3-0.6B-sized models, whose JavaScript copy would
   * otherwise stay resident beside ORT's until V8 collects it), off below.
   */
  loadViaFile: z.boolean().optional(),
  /** The older way to one weight copy (W·xᵀ layout, decoder.ts `linear`); prefer `disablePrepacking`. Default false. */
  inPlaceWeights: z.boolean().default(false),
  /** Execution provider of the generation session (creation fails, never falls back to the CPU, when it cannot load). Default 'cpu'. */
  provider: z.enum(PROVIDERS).default('cpu'),
  /** GPU index for 'cuda'. Default 0. */
  deviceId: z.number().int().nonnegative().default(0),
  /** ORT threads inside one op, per replica. Default 1 (the commands pass the machine's cores, `--threads`, split over the replicas). */
  intraOpThreads: z.number().int().positive().default(1),
  /**
   * Engine replicas: independent worker threads, each with its own session, scheduler and KV caches,
   * the episodes spread over them (an episode stays on the replica of its first turn, so its cache
   * does). `maxBatchSize` and `kvCacheBytes` are split between them. On the CPU a small model's decode
   * step is a few hundred small kernels whose cost grows with the batch, and ORT's intra-op threads
   * split each of them: two replicas of one thread beat one of two threads (docs/inference.md,
   * "Replicas"). Default 1.
   */
  replicas: z.number().int().positive().default(1),
  /** ORT threads running independent nodes at once. Default 1. */
  interOpThreads: z.number().int().positive().default(1),
  /**
   * ONNX Runtime's CPU memory arena for the generation session. On (the default), a run's
   * intermediates reuse memory the arena already holds; off, every big intermediate is fresh memory
   * from the system, zeroed page by page, which made Qwen3-0.6B-shaped runs ~3.3× slower
   * (docs/inference.md, "Memory of a run"). Off holds less between runs: for a host short of memory.
   */
  cpuMemArena: z.boolean().default(true),
});
export type InferenceEngineOptions = z.input<typeof engineOptionsSchema>;

/**
 * Per execution provider: whether KV caches are kept between turns and the decode chunk. The CPU
 * keeps caches in host memory, so reuse and continuous batching cost only host copies. A GPU session
 * without IO binding (onnxruntime-node has none) copies every input to the device and every output
 * back per run. On CUDA the in-graph loop of a whole turn keeps the cache on the device and a
 * re-prefill is about as cheap as moving the cache across (arithmetic in docs/inference.md, "On a
 * GPU"): the static engine. On WebGPU, whose prefill is slow (ONNX Runtime runs the graph's loops on
 * the CPU there), a kept cache fed across the bus beat the re-prefill 2.49× on an H200
 * (bench/results/gpu.md): caches are kept between turns, and a turn still decodes in one run.
 */
export function turnSchedulingDefaults(provider: string): { reuseKv: boolean; sharePrefixes: boolean; chunkSteps: number; chunkStopShare: number } {
  // On the CPU a decode run ends once a quarter of its rows has stopped, or after 32 steps: measured
  // 10–20 % more episodes/s than fixed chunks of 16 (docs/inference.md, "Runs that end when rows stop").
  if (provider === 'cpu') return { reuseKv: true, sharePrefixes: true, chunkSteps: 32, chunkStopShare: 0.25 };
  if (provider === 'webgpu') return { reuseKv: true, sharePrefixes: true, chunkSteps: Infinity, chunkStopShare: 1 };
  return { reuseKv: false, sharePrefixes: false, chunkSteps: Infinity, chunkStopShare: 1 };
}

/** Largest model (float32 weight bytes) the CPU default runs as several replicas: each holds its own copy. */
export const REPLICA_MAX_WEIGHT_BYTES = 256 * 2 ** 20;

/** Fewest rows per replica the CPU default aims at: a decode step's cost per row falls steeply up to about 8–16 rows. */
export const REPLICA_MIN_ROWS = 16;

/**
 * How a process's threads become engine threads, each replica getting an equal share (at least one):
 * `replicas` when given; otherwise a CPU model of at most REPLICA_MAX_WEIGHT_BYTES runs as
 * min(threads, ⌈maxBatchSize / REPLICA_MIN_ROWS⌉) replicas, a larger one (or another provider) as one
 * replica with all the threads. Measured on 2 cores (sqlenv-base, 480 dev episodes at 32 in flight):
 * two replicas of one thread 23.1 s, one of two threads 32.1 s, three or four replicas slower again
 * (docs/inference.md, "Replicas").
 */
export function replicaPlan(input: { provider: string; threads: number; maxBatchSize: number; weightBytes: number; replicas?: number | undefined }): { replicas: number; intraOpThreads: number } {
  const threads = Math.max(1, input.threads);
  const small = input.provider === 'cpu' && input.weightBytes <= REPLICA_MAX_WEIGHT_BYTES;
  const replicas = input.replicas ?? (small ? Math.max(1, Math.min(threads, Math.ceil(input.maxBatchSize / REPLICA_MIN_ROWS))) : 1);
  return { replicas, intraOpThreads: Math.max(1, Math.floor(threads / replicas)) };
}

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

export interface EngineStats extends SchedulerStats {
  /** Rows per loop iteration, averaged over iterations (rowSteps ÷ steps): the batch the decode ran at. */
  meanBatchSize: number;
}

/** One engine thread: its call plumbing, its latest counters and the turns it holds. */
class Replica {
  readonly rpc: WorkerRpc<EngineRequest, EngineReply>;
  /** The worker's counters as of its latest finished turn. */
  stats: SchedulerStats = emptySchedulerStats();
  inFlight = 0;

  constructor(worker: Worker, log: Logger) {
    // Registered before the call plumbing's own listener: a turn's counters are in place when its caller resumes.
    worker.on('message', (reply: EngineReply) => {
      if (reply.type === 'turn' && reply.stats.turns >= this.stats.turns) this.stats = reply.stats;
    });
    this.rpc = new WorkerRpc<EngineRequest, EngineReply>(worker, {
      name: 'inference worker',
      replyId: (reply) => (reply.type === 'done' || reply.type === 'error' || reply.type === 'turn' ? reply.id : undefined),
      replyError: (reply) => (reply.type === 'error' ? new AppError(reply.code, reply.message) : undefined),
      logger: log,
    });
  }
}

/** Sum of the replicas' counters. */
function addStats(a: SchedulerStats, b: SchedulerStats): SchedulerStats {
  const sum = { ...a };
  for (const key of Object.keys(sum) as (keyof SchedulerStats)[]) sum[key] += b[key];
  return sum;
}

export class InferenceEngine {
  readonly vocabSize: number;
  readonly #replicas: Replica[];
  /** Which replica holds each episode's cache (least recently used first; bounded). */
  readonly #home = new Map<string, Replica>();
  readonly #homeLimit: number;
  #policyVersion = 0;

  private constructor(replicas: Replica[], vocabSize: number, homeLimit: number) {
    this.vocabSize = vocabSize;
    this.#replicas = replicas;
    this.#homeLimit = homeLimit;
  }

  /** Start the worker threads, load the checkpoint in each and build their generation sessions. */
  static async start(input: InferenceEngineOptions, logger: Logger = silentLogger): Promise<InferenceEngine> {
    const parsed = engineOptionsSchema.safeParse(input);
    if (!parsed.success) throw new AppError(ErrorCode.VALIDATION, `invalid inference engine options: ${formatZodIssues(parsed.error)}`);
    const options = parsed.data;
    const n = options.replicas;
    const setup: EngineWorkerSetup = {
      modelDir: options.modelDir,
      lora: options.lora,
      inPlaceWeights: options.inPlaceWeights,
      ...(options.loadViaFile === undefined ? {} : { loadViaFile: options.loadViaFile }),
      disablePrepacking: options.disablePrepacking,
      session: {
        provider: options.provider,
        deviceId: options.deviceId,
        intraOpThreads: options.intraOpThreads,
        interOpThreads: options.interOpThreads,
        cpuMemArena: options.cpuMemArena,
      },
      scheduler: {
        ...turnSchedulingDefaults(options.provider),
        ...(options.reuseKv === undefined ? {} : { reuseKv: options.reuseKv, sharePrefixes: options.reuseKv }),
        ...(options.sharePrefixes === undefined ? {} : { sharePrefixes: options.sharePrefixes }),
        ...(options.chunkSteps === undefined ? {} : { chunkSteps: options.chunkSteps }),
        maxBatchSize: Math.ceil(options.maxBatchSize / n),
        kvCacheBytes: Math.floor(options.kvCacheBytes / n),
        maxPrefillScoresBytes: options.maxPrefillScoresBytes,
        lengthBucketTokens: options.lengthBucketTokens,
        batchWindowMs: options.batchWindowMs,
        returnWaitMs: options.returnWaitMs,
        residentBatch: options.residentBatch,
        ...(options.chunkStopShare === undefined ? {} : { chunkStopShare: options.chunkStopShare }),
        topK: options.topK,
        stopIds: options.stopIds,
      },
    };
    const log = logger.child({ component: 'inference-engine' });
    const started = await Promise.allSettled(
      Array.from({ length: n }, () =>
        startRpcWorker(new URL('./engine-worker.ts', import.meta.url), setup, 'inference worker', (message) => {
          const reply = message as EngineReply;
          if (reply.type === 'ready') return reply;
          throw new AppError(ErrorCode.MODEL, reply.type === 'init-error' ? reply.message : `unexpected ${reply.type}`);
        }),
      ),
    );
    const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed !== undefined) {
      await Promise.all(started.map((r) => (r.status === 'fulfilled' ? r.value.worker.terminate() : undefined)));
      throw failed.reason;
    }
    const workers = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    const first = workers[0] as (typeof workers)[number];
    log.info({ ...first.ready.session, replicas: n }, 'session created');
    return new InferenceEngine(
      workers.map(({ worker }) => new Replica(worker, log)),
      first.ready.vocabSize,
      4 * options.maxBatchSize,
    );
  }

  /** The newest version every worker thread has acknowledged (turns carry their own, exact one). */
  get policyVersion(): number {
    return this.#policyVersion;
  }

  /** Engine threads (`replicas`). */
  get replicas(): number {
    return this.#replicas.length;
  }

  /** Each replica's counters. */
  get replicaStats(): SchedulerStats[] {
    return this.#replicas.map((r) => ({ ...r.stats }));
  }

  get stats(): EngineStats {
    const s = this.#replicas.map((r) => r.stats).reduce(addStats);
    return { ...s, meanBatchSize: s.steps === 0 ? 0 : s.rowSteps / s.steps };
  }

  /** Queue one turn; resolves when it has finished (its stop token or its budget). */
  generate(request: TurnRequest): Promise<TurnResult> {
    if (!Number.isInteger(request.maxNewTokens) || request.maxNewTokens < 1) {
      return Promise.reject(new AppError(ErrorCode.VALIDATION, `maxNewTokens must be an integer ≥ 1, got ${request.maxNewTokens}`));
    }
    const turn = {
      promptIds: [...request.promptIds],
      maxNewTokens: request.maxNewTokens,
      ...(request.seed === undefined ? {} : { seed: request.seed }),
      ...(request.temperature === undefined ? {} : { temperature: request.temperature }),
      ...(request.topP === undefined ? {} : { topP: request.topP }),
      ...(request.cacheKey === undefined ? {} : { cacheKey: request.cacheKey }),
    };
    const replica = this.#route(request.cacheKey);
    replica.inFlight++;
    return replica.rpc
      .call((id) => ({ type: 'submit', id, turn }))
      .then((reply) => {
        if (reply.type !== 'turn') throw new AppError(ErrorCode.INTERNAL, `unexpected ${reply.type} reply from the inference worker`);
        return reply.result;
      })
      .finally(() => {
        replica.inFlight--;
      });
  }

  /**
   * The replica of a turn: its episode's (where its cache is parked), else the one holding the
   * fewest turns. Tokens do not depend on the replica (each row reads its own seed's uniforms).
   */
  #route(cacheKey: string | undefined): Replica {
    if (this.#replicas.length === 1) return this.#replicas[0] as Replica;
    const home = cacheKey === undefined ? undefined : this.#home.get(cacheKey);
    const replica = home ?? this.#replicas.reduce((best, r) => (r.inFlight < best.inFlight ? r : best));
    if (cacheKey !== undefined) {
      this.#home.delete(cacheKey);
      this.#home.set(cacheKey, replica);
      // Episodes do not say when they end: keep the most recent few times the batch.
      for (const key of this.#home.keys()) {
        if (this.#home.size <= this.#homeLimit) break;
        this.#home.delete(key);
      }
    }
    return replica;
  }

  /**
   * Swap the adapter (a new policy version) on every replica; `null` keeps the current tensors and
   * only moves the version (a trainer that published no weights). Turns already
   * posted to the worker finish with the old adapter (the swap waits for them);
   * later ones use the new one. New tensors drop the kept KV caches (computed
   * under the old adapter), so the next turn of each episode re-prefills.
   * Every result carries the version the worker thread actually sampled it with,
   * so a turn posted while the swap is in flight is never tagged with the wrong version.
   */
  async setLora(weights: LoraWeights | null, version: number): Promise<void> {
    if (!Number.isInteger(version) || version < 0) throw new AppError(ErrorCode.VALIDATION, `policy version must be an integer ≥ 0, got ${version}`);
    let copy: Record<string, Float32Array> | null = null;
    if (weights !== null) {
      copy = {};
      for (const [name, values] of weights) copy[name] = values;
    }
    const replies = await Promise.all(this.#replicas.map((r) => r.rpc.call((id) => ({ type: 'set-lora', id, weights: copy, version }))));
    const acknowledged = minOf(replies.map((reply) => (reply.type === 'done' ? reply.policyVersion : -1)));
    if (acknowledged >= 0) this.#policyVersion = Math.max(this.#policyVersion, acknowledged);
  }

  /** Stop the workers; pending turns fail with ABORTED. Idempotent. */
  async close(): Promise<void> {
    await Promise.all(this.#replicas.map((r) => r.rpc.close('the inference engine was closed')));
  }
}
