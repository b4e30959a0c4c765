import { checkContextHoldsSystemTurn, EngineCompletionSource, LlmPolicy, systemTurnIds } from '@sqlenv/agents';
import type * as ModelModule from '@sqlenv/model';
import type { EngineMemoryPlan, ExperimentalEngineOptions, InferenceEngine, LoraConfig, PublicEngineOptions } from '@sqlenv/model';
import type { RunModelSpec, SamplingSettings } from '@sqlenv/protocol';
import { join } from 'node:path';
import { AppError, ErrorCode, readMemoryLimit, silentLogger, type Logger, type MemoryLimit } from '@sqlenv/shared';
import { isStatsWeightsBlob } from '../trainer.ts';
import type { ModelExecution } from './execution.ts';
import { loadPolicySetup, type PolicySetup } from './policy-setup.ts';

/** The model policy of a run in one process: one InferenceEngine shared by every episode. */
export interface ModelResources {
  policy: LlmPolicy;
  /** The in-process engine; absent when the completions come from inference servers (createRemoteModelResources). */
  engine?: InferenceEngine;
  sampling: SamplingSettings;
  /** Tokens an episode may use in all (the spec's context_tokens, capped by the model's). */
  contextTokens: number;
  /** Turns the in-process engine batches: the concurrency asked for, capped by the turns whose KV fits under the memory limit. */
  maxBatchSize?: number;
  /**
   * Apply the committed weights of a policy version: an adapter blob (safetensors, as
   * `encodeAdapter` writes it) replaces the LoRA tensors; a statistics-only blob
   * (StatsPolicyUpdater) or null moves the version and keeps the tensors.
   */
  applyWeights(blob: Buffer | null, version: number): Promise<void>;
  close(): Promise<void>;
}

export interface ModelResourcesOptions {
  /** Most turns batched into one generation run (the worker's concurrency), capped by the turns whose KV cache fits the memory limit. */
  maxBatchSize: NonNullable<PublicEngineOptions['maxBatchSize']>;
  /** The engine's measurement knobs (InferenceEngine `experimentalEngineOptionsSchema`: the bench sets them); default: the engine's. */
  experimental?: ExperimentalEngineOptions;
  /**
   * `null`: build the graphs without LoRA inputs (plain evaluation of the base model, no
   * adapter work per token); weights blobs can then not be applied. Default: the spec's LoRA.
   */
  lora?: null;
  /** Provider and threads of the engine's session (`--execution-provider`, `--threads`); default: the engine's (CPU, one thread). */
  execution?: ModelExecution;
  /** Engine replicas, splitting `execution`'s threads; default: `replicaPlan` (several for a small model on the CPU). */
  replicas?: PublicEngineOptions['replicas'];
  /** Lanes in lockstep for evaluations (the engine's `deterministic` option): the same evaluation gives the same tokens every time. Default false. */
  deterministic?: PublicEngineOptions['deterministic'];
  /** The memory limit the engine is planned under; default: this process's (readMemoryLimit). */
  memoryLimit?: MemoryLimit;
  logger?: Logger;
}

/**
 * What is refused before anything is loaded (a context that cannot hold the system turn, a model that
 * cannot fit the memory limit) and the engine's KV budget and batch under that limit. Concurrency
 * beyond the turns whose KV fits is served by queueing: the extra turns wait for a row.
 */
function planModelMemory(
  model: typeof ModelModule,
  input: Pick<PolicySetup, 'config' | 'chat' | 'prompt' | 'contextTokens'> & { spec: RunModelSpec; modelDir: string; lora: LoraConfig | null; options: ModelResourcesOptions; logger: Logger },
): EngineMemoryPlan {
  const { spec, options, logger } = input;
  const systemIds = systemTurnIds(input.chat, input.prompt);
  checkContextHoldsSystemTurn(input.chat, systemIds, input.contextTokens);
  const memoryLimit = options.memoryLimit ?? readMemoryLimit();
  const plan = model.planEngineMemory({
    config: input.config,
    what: join(input.modelDir, 'config.json'),
    memoryLimit,
    lora: input.lora ?? undefined,
    maxBatchSize: Math.max(1, options.maxBatchSize),
    turnTokens: Math.min(input.contextTokens, systemIds.length + spec.max_new_tokens),
  });
  if (plan.maxBatchSize < options.maxBatchSize) {
    logger.warn({ concurrency: options.maxBatchSize, maxBatchSize: plan.maxBatchSize, kvCacheBytes: plan.kvCacheBytes, memoryLimitBytes: memoryLimit.bytes, memoryLimitSource: memoryLimit.source }, 'batch capped by the memory limit: the other turns wait');
  }
  return plan;
}

/**
 * Start the model policy a run spec describes, on this process's model
 * directory (checked by loadPolicySetup). Refuses an adapter whose shape is not
 * the spec's LoRA. ONNX Runtime is loaded here, only for model runs.
 */
export async function createModelResources(spec: RunModelSpec, modelDir: string, options: ModelResourcesOptions): Promise<ModelResources & { engine: InferenceEngine }> {
  const model = await import('@sqlenv/model');
  const logger = (options.logger ?? silentLogger).child({ component: 'model-policy' });
  const { config, chat, prompt, contextTokens, stopIds } = await loadPolicySetup(spec, modelDir);
  const lora = options.lora === null ? null : model.parseLoraConfig(spec.lora);
  if (lora === null && spec.adapter !== null) throw new AppError(ErrorCode.VALIDATION, 'an adapter needs the LoRA inputs (lora: null was asked for)');
  const plan = planModelMemory(model, { spec, modelDir, config, chat, prompt, contextTokens, lora, options, logger });
  const engine = await model.InferenceEngine.start(
    {
      modelDir,
      ...(lora === null ? {} : { lora }),
      maxBatchSize: plan.maxBatchSize,
      kvCacheBytes: plan.kvCacheBytes,
      ...(options.experimental === undefined ? {} : { experimental: options.experimental }),
      topK: spec.sampling.top_k,
      stopIds,
      ...(options.deterministic === undefined ? {} : { deterministic: options.deterministic }),
      ...options.execution,
      // A small model runs as several engine threads splitting the process's threads (docs/inference.md, "Replicas").
      ...(options.execution === undefined
        ? {}
        : model.replicaPlan({
            provider: options.execution.provider,
            threads: options.execution.intraOpThreads,
            maxBatchSize: plan.maxBatchSize,
            weightBytes: 4 * model.countParameters(config),
            replicas: options.replicas,
          })),
    },
    logger.child({ role: 'engine' }),
  );
  const decode = (bytes: Uint8Array, label: string): Map<string, Float32Array> => {
    if (lora === null) throw new AppError(ErrorCode.VALIDATION, `${label}: this policy was started without LoRA inputs`);
    const adapter = model.decodeAdapter(config, bytes, { label });
    model.checkSameLora(adapter.lora, lora, label, "the run's");
    return adapter.weights;
  };
  try {
    if (spec.adapter !== null && lora !== null) {
      const adapter = model.loadAdapterDir(spec.adapter, config);
      model.checkSameLora(adapter.lora, lora, spec.adapter, "the run's");
      await engine.setLora(adapter.weights, 0);
    }
  } catch (error) {
    await engine.close();
    throw error;
  }
  const sampling: SamplingSettings = { ...spec.sampling };
  const policy = new LlmPolicy({
    chat,
    prompt,
    source: new EngineCompletionSource(engine, { temperature: sampling.temperature, topP: sampling.top_p, topK: sampling.top_k }),
    maxNewTokens: spec.max_new_tokens,
    contextTokens,
  });
  logger.info({ modelDir, architecture: config.architecture, contextTokens, systemTokens: policy.systemIds.length, lora }, 'model policy ready');
  return {
    policy,
    engine,
    sampling,
    contextTokens,
    maxBatchSize: plan.maxBatchSize,
    applyWeights: async (blob, version) => {
      const weights = blob === null || isStatsWeightsBlob(blob) ? null : decode(blob, `weights of version ${version}`);
      await engine.setLora(weights, version);
      logger.info({ version, adapter: weights !== null }, 'policy version loaded');
    },
    close: () => engine.close(),
  };
}
