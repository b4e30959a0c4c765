/**
 * The inference-engine variants bench:rollout-llm compares, each named by what it is. Options are
 * the engine's `experimental` knobs (`createModelResources` and `InferenceEngine.start` take them); `threads` overrides
 * BENCH_THREADS for that variant. Replicas split a process's ORT threads (`replicaPlan`) unless a
 * variant fixes them.
 */
import type { ExperimentalEngineOptions, PublicEngineOptions } from '@sqlenv/model';

/** A variant: the engine's experimental knobs, optionally a fixed replica count and thread count. */
export type EngineSetting = ExperimentalEngineOptions & Pick<PublicEngineOptions, 'replicas'> & { threads?: number };

export const ENGINE_VARIANTS = {
  /** The engine exactly as the CLI runs it: no option set. */
  default: {},
  /** One batch at a time until its longest row stops; every turn re-prefills its whole context. */
  static: { reuseKv: false, batching: 'static' },
  /** `static` as one replica with all the threads, prompt widths padded to multiples of 128 tokens. */
  'static-one-replica-bucket-128': { reuseKv: false, batching: 'static', replicas: 1, lengthBucketTokens: 128 },
  /** The same on one ORT thread whatever BENCH_THREADS says. */
  'static-one-replica-bucket-128-one-thread': { reuseKv: false, batching: 'static', replicas: 1, lengthBucketTokens: 128, threads: 1 },
  /** Per-episode KV caches and continuous batching, every episode's first turn prefilled from scratch. */
  'continuous-no-prefix-share': { sharePrefixes: false },
  /** `default` as one replica with all the threads. */
  'one-replica': { replicas: 1 },
  'bucket-16': { lengthBucketTokens: 16 },
  'bucket-8': { lengthBucketTokens: 8 },
  /** A decode run ends once half of its rows has stopped. */
  'stop-half': { chunkStopShare: 0.5 },
  /** A decode run ends once any one of its rows has stopped. */
  'stop-one': { chunkStopShare: 0.01 },
  /** Decode runs of at most 8 or 4 steps: turns join and leave more often. */
  'chunk-8': { chunkSteps: 8 },
  'chunk-4': { chunkSteps: 4 },
  'one-replica-chunk-8': { replicas: 1, chunkSteps: 8 },
  /** Fixed decode chunks of 16 steps: a run ends only when all its rows have stopped. */
  'chunk-16-stop-all': { chunkSteps: 16, chunkStopShare: 1 },
} as const satisfies Record<string, EngineSetting>;

export type EngineVariant = keyof typeof ENGINE_VARIANTS;

export function isEngineVariant(name: string): name is EngineVariant {
  return Object.hasOwn(ENGINE_VARIANTS, name);
}

/** Engine variant names from a comma-separated list (all of them when undefined); throws on an unknown one. */
export function parseEngineVariants(list: string | undefined): EngineVariant[] {
  const names = list === undefined ? Object.keys(ENGINE_VARIANTS) : list.split(',');
  return names.map((name) => {
    if (!isEngineVariant(name)) throw new Error(`unknown engine variant ${name} (one of ${Object.keys(ENGINE_VARIANTS).join(', ')})`);
    return name;
  });
}
