import { z } from 'zod';
import { PROVIDERS } from '@sqlenv/onnx-graph';
import type { ModelConfig } from '../io/config.ts';
import { loraConfigSchema } from '../graphs/lora.ts';
import { kvBytesPerToken } from './kv-cache.ts';

/**
 * The inference engine's options, defined once: what a user sets (`publicEngineOptionsSchema`) and the
 * measurement knobs only the bench and tests set (`experimentalEngineOptionsSchema`, under the
 * `experimental` key of `engineOptionsSchema`). Everything else (the worker's setup, the scheduler's policy, the rollout's
 * model resources, the CLI, the bench) takes these types.
 */
export const publicEngineOptionsSchema = z.strictObject({
  /** Checkpoint directory (config.json + safetensors), loaded inside the worker thread. */
  modelDir: z.string().min(1),
  /** Build LoRA inputs (rank, alpha, targets); default: no adapter support. */
  lora: loraConfigSchema.optional(),
  /** Most rows per run. Default 32. */
  maxBatchSize: z.number().int().positive().default(32),
  /**
   * Bound on KV cache memory, in bytes: active turns (reserved at prompt + max new tokens) plus the
   * caches parked between turns and the shared prompt prefixes (least recently used dropped first).
   * A turn that alone exceeds it still runs, by itself. Default: min(4 GiB, half of what this
   * process's memory limit leaves after the weights) (`defaultKvCacheBytes`, engine-memory-plan.ts;
   * 4 GiB holds 8 Qwen3-0.6B turns of 2,300 tokens at 224 KiB per token).
   */
  kvCacheBytes: z.number().int().positive().optional(),
  /** top-k for every run (0 = off). Default 0. */
  topK: z.number().int().nonnegative().default(0),
  /** Stop ids; default: the checkpoint's eos_token_id. */
  stopIds: z.array(z.number().int().nonnegative()).optional(),
  /** Execution provider of the generation session (creation fails, never falls back to the CPU, when it cannot load). Default 'cpu'. */
  provider: z.enum(PROVIDERS).default('cpu'),
  /** GPU index for 'cuda'. Default 0. */
  deviceId: z.number().int().nonnegative().default(0),
  /** ORT threads inside one op, per replica. Default 1 (the commands pass the machine's cores, `--threads`, split over the replicas). */
  intraOpThreads: z.number().int().positive().default(1),
  /** ORT threads running independent nodes at once. Default 1. */
  interOpThreads: z.number().int().positive().default(1),
  /**
   * Engine replicas: independent worker threads, each with its own session, scheduler and KV caches,
   * the episodes spread over them (an episode stays on the replica of its first turn, so its cache
   * does). `maxBatchSize` and `kvCacheBytes` are split between them (docs/inference.md, "Replicas").
   * Default 1.
   */
  replicas: z.number().int().positive().default(1),
  /**
   * ONNX Runtime's CPU memory arena for the generation session. On (the default), a run's
   * intermediates reuse memory the arena already holds; off holds less between runs, for a host short
   * of memory, and makes big models' runs several times slower (docs/inference.md, "Memory of a run").
   */
  cpuMemArena: z.boolean().default(true),
  /**
   * Evaluation lanes (`InferenceEngine.openLane`) in lockstep: each lane lives on one replica, which
   * runs nothing while one of its open lanes has no turn there, and lane turns are admitted by the
   * loop iteration they arrived in, then by episode index. A turn's batch-mates, row and chunk
   * boundaries then depend only on the command, never on timing: the same evaluation gives the same
   * tokens every time at a given concurrency (docs/inference.md, "Exactness"). Turns outside lanes
   * are served as usual. Default false.
   */
  deterministic: z.boolean().default(false),
});

export const experimentalEngineOptionsSchema = z.strictObject({
  /**
   * Keep each episode's KV cache between its turns (requests carry `cacheKey`), so the next turn
   * prefills only the tokens appended since. Default: per execution provider (`turnSchedulingDefaults`).
   */
  reuseKv: z.boolean().optional(),
  /**
   * With `reuseKv`: a turn without a cache of its own starts from the longest kept prompt prefix it
   * shares with an earlier turn (the system prompt, a GRPO group's first prompt). Default: where `reuseKv` is.
   */
  sharePrefixes: z.boolean().optional(),
  /**
   * How turns are batched. `continuous`: turns join and leave between decode runs of at most
   * `chunkSteps` steps. `static`: a batch is admitted only when none is running and decodes in one run
   * until its longest row stops. Default: per execution provider (`turnSchedulingDefaults`).
   */
  batching: z.enum(['continuous', 'static']).optional(),
  /**
   * Continuous batching: most decode steps per run; between runs finished turns leave and waiting
   * turns join (bench/results/rollout-llm-stop-series.md). Default: per execution provider.
   */
  chunkSteps: z.number().int().positive().optional(),
  /**
   * Continuous batching: a decode run ends early once this share of its rows has stopped (at least
   * one), so finished turns leave and waiting ones join; 1: only when all have stopped or after
   * `chunkSteps` steps. Default: per execution provider (`turnSchedulingDefaults`).
   */
  chunkStopShare: z.number().gt(0).lte(1).optional(),
  /** Prompt widths are rounded up to a multiple of this (bench/results/rollout-llm-variants.md). Default 32 tokens. */
  lengthBucketTokens: z.number().int().positive().default(32),
  /** After the first request arrives at an idle engine, wait this long for more. Default 2 ms. */
  batchWindowMs: z.number().nonnegative().default(2),
  /**
   * Bound on one prefill run's attention scores, rows × heads × min(C, width) × width float32 values,
   * in bytes, C the generation graph's prefill chunk (DEFAULT_PREFILL_CHUNK_TOKENS); estimateGenerationMemory
   * (attention-memory.ts) gives a whole run's. Waiting turns are taken in order while the next still
   * fits (one always goes). Default 256 MiB.
   */
  maxPrefillScoresBytes: z.number().int().positive().default(256 * 1024 * 1024),
  /**
   * Turn ONNX Runtime's weight pre-packing off (`session.disable_prepacking`): one copy of each weight
   * instead of the original plus a packed one per consuming loop. Default: by the weights' size
   * (`prepackingDecision`, prepacking.ts); the decision is in the `session created` log line.
   */
  disablePrepacking: z.boolean().optional(),
  /**
   * Load the session through a model file in a temporary directory (removed once loaded), the float32
   * weights released first (`Generator` `modelFile` + `releaseWeights`; bench/results/generate.md).
   * Default: on above the pre-packing threshold, off below.
   */
  loadViaFile: z.boolean().optional(),
});

export const engineOptionsSchema = publicEngineOptionsSchema.extend({
  /** Measurement knobs: only the bench and tests set them; every field has its default. */
  experimental: experimentalEngineOptionsSchema.prefault({}),
});

/** What a caller passes (defaults unapplied). */
export type InferenceEngineOptions = z.input<typeof engineOptionsSchema>;
/** What a user of the engine sets: apps and the rollout take only these. */
export type PublicEngineOptions = z.input<typeof publicEngineOptionsSchema>;
/** The measurement knobs (bench and tests). */
export type ExperimentalEngineOptions = z.input<typeof experimentalEngineOptionsSchema>;
/** Parsed options, defaults applied and the KV budget resolved: what each worker thread gets (its replica's share of the batch and the KV bytes). */
export type EngineOptions = Omit<z.output<typeof engineOptionsSchema>, 'kvCacheBytes'> & { kvCacheBytes: number };

/** How turns are batched: continuous (turns join and leave between decode chunks) or static (one batch at a time, to its end). */
export type Batching = NonNullable<ExperimentalEngineOptions['batching']>;

/** The scheduler's policy: the engine options it reads, every default resolved, and the model facts its bounds need. */
export interface SchedulerPolicy extends Pick<EngineOptions, 'maxBatchSize' | 'kvCacheBytes' | 'topK'>, Pick<EngineOptions['experimental'], 'maxPrefillScoresBytes' | 'lengthBucketTokens' | 'batchWindowMs'> {
  batching: Batching;
  /** Continuous batching: most decode steps per run. */
  chunkSteps: number;
  chunkStopShare: number;
  reuseKv: boolean;
  sharePrefixes: boolean;
  stopIds: readonly number[];
  /** Attention heads of the model (the prefill scores bound). */
  numHeads: number;
  /** KV bytes per cached token of the model. */
  bytesPerToken: number;
}

/**
 * Per execution provider: whether KV caches are kept between turns and how turns are batched. The CPU
 * keeps caches in host memory, so reuse and continuous batching cost only host copies; a decode run
 * there ends once a quarter of its rows has stopped, or after 32 steps (docs/inference.md, "Runs that
 * end when rows stop"). On CUDA the in-graph loop of a whole turn keeps the cache on the device and a
 * re-prefill costs about what moving the cache would (docs/inference.md, "On a GPU"): static batches.
 * On WebGPU a kept cache fed across the bus beat the re-prefill (bench/results/gpu.md): caches are
 * kept, and a turn still decodes in one run.
 */
export function turnSchedulingDefaults(provider: string): Pick<SchedulerPolicy, 'reuseKv' | 'sharePrefixes' | 'batching' | 'chunkSteps' | 'chunkStopShare'> {
  if (provider === 'cpu') return { reuseKv: true, sharePrefixes: true, batching: 'continuous', chunkSteps: 32, chunkStopShare: 0.25 };
  if (provider === 'webgpu') return { reuseKv: true, sharePrefixes: true, batching: 'static', chunkSteps: 32, chunkStopShare: 1 };
  return { reuseKv: false, sharePrefixes: false, batching: 'static', chunkSteps: 32, chunkStopShare: 1 };
}

/** The scheduler's policy from parsed options: the provider's defaults, then what the experimental options set. */
export function schedulerPolicy(options: EngineOptions, config: ModelConfig): SchedulerPolicy {
  const defaults = turnSchedulingDefaults(options.provider);
  const knobs = options.experimental;
  const reuseKv = knobs.reuseKv ?? defaults.reuseKv;
  return {
    maxBatchSize: options.maxBatchSize,
    kvCacheBytes: options.kvCacheBytes,
    maxPrefillScoresBytes: knobs.maxPrefillScoresBytes,
    lengthBucketTokens: knobs.lengthBucketTokens,
    batchWindowMs: knobs.batchWindowMs,
    topK: options.topK,
    batching: knobs.batching ?? defaults.batching,
    chunkSteps: knobs.chunkSteps ?? defaults.chunkSteps,
    chunkStopShare: knobs.chunkStopShare ?? defaults.chunkStopShare,
    reuseKv,
    sharePrefixes: knobs.sharePrefixes ?? (knobs.reuseKv === undefined ? defaults.sharePrefixes : reuseKv),
    stopIds: options.stopIds ?? config.eosTokenIds,
    numHeads: config.numHeads,
    bytesPerToken: kvBytesPerToken(config),
  };
}
