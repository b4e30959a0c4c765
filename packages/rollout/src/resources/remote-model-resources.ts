import { AdapterManager, checkInferenceServers, InferencePool, LlmPolicy, RemoteCompletionSource, remoteSamplingProblem, type InferencePoolConfig } from '@sqlenv/agents';
import type { RunModelSpec, SamplingSettings } from '@sqlenv/protocol';
import { AppError, ErrorCode, silentLogger, type Logger } from '@sqlenv/shared';
import { isStatsWeightsBlob } from '../trainer.ts';
import { checkAdapterPublished } from './adapter-share.ts';
import type { ModelResources } from './model-resources.ts';
import { loadPolicySetup } from './policy-setup.ts';

/** Where a process samples remotely: `--inference-url`, `--inference-api-key`, `--inference-model`, `--inference-concurrency`. */
export interface RemoteInferenceOptions {
  /** The servers, their key and per-server bounds. */
  pool: InferencePoolConfig;
  /** The served base model; default: the one root model the servers list. */
  model?: string;
  /** The adapter share as this process sees it (`--adapter-share`): needed to sample a training run's versions. */
  adapterShare?: string;
  /** The share as the servers see it (`--adapter-share-as`); default: `adapterShare`. */
  adapterShareAs?: string;
}

export interface RemoteModelResourcesOptions {
  remote: RemoteInferenceOptions;
  /** The training run whose versions are sampled (`<run>-v<N>`); absent: the base model only (eval, play). */
  runId?: string;
  /** The run's staleness bound: a server keeps at most this + 2 of its adapters. */
  maxStaleness?: number;
  logger?: Logger;
}

/**
 * The model policy with its completions from inference servers speaking
 * vLLM's contract: the tokenizer, chat template and config come from this
 * process's model directory, no weights are loaded and no engine is started.
 * A committed version is sampled as its adapter in the share, loaded on each
 * server by name; version 0 is the base model unless the run starts from an
 * adapter (published as v0 by the trainer).
 */
export async function createRemoteModelResources(spec: RunModelSpec, modelDir: string, options: RemoteModelResourcesOptions): Promise<ModelResources> {
  const logger = (options.logger ?? silentLogger).child({ component: 'remote-model-policy' });
  const { remote, runId } = options;
  const problem = remoteSamplingProblem({ topP: spec.sampling.top_p, topK: spec.sampling.top_k });
  if (problem !== null) throw new AppError(ErrorCode.VALIDATION, `refused: ${problem}`);
  if (runId === undefined && spec.adapter !== null) {
    throw new AppError(ErrorCode.VALIDATION, `an adapter (${spec.adapter}) with remote inference: load it on the servers and name it with --inference-model`);
  }
  if (runId !== undefined && remote.adapterShare === undefined) {
    throw new AppError(ErrorCode.VALIDATION, `run ${runId} trains its policy, and remote inference servers load each version from the adapter share: give --adapter-share DIR (SQLENV_ADAPTER_SHARE)`);
  }
  const setup = await loadPolicySetup(spec, modelDir);
  const pool = new InferencePool(remote.pool, logger);
  const base = await checkInferenceServers(pool, remote.model);
  const contextTokens = Math.min(setup.contextTokens, base.maxModelLen ?? setup.contextTokens);
  const sharePath = remote.adapterShareAs ?? remote.adapterShare;
  const adapters = new AdapterManager(pool, {
    baseModel: base.name,
    ...(runId === undefined ? {} : { runId }),
    startAdapter: spec.adapter !== null,
    ...(sharePath === undefined ? {} : { sharePath }),
    maxLoaded: (options.maxStaleness ?? 0) + 2,
  });
  const source = new RemoteCompletionSource({ pool, adapters, sampling: { temperature: spec.sampling.temperature, topP: spec.sampling.top_p, topK: spec.sampling.top_k }, stopIds: setup.stopIds });
  const policy = new LlmPolicy({ chat: setup.chat, prompt: setup.prompt, source, maxNewTokens: spec.max_new_tokens, contextTokens });
  const sampling: SamplingSettings = { ...spec.sampling };
  logger.info({ servers: pool.servers.map((s) => s.url), baseModel: base.name, contextTokens, runId: runId ?? null }, 'remote model policy ready');
  return {
    policy,
    sampling,
    contextTokens,
    applyWeights: (blob, version) => {
      const hasAdapter = blob !== null && !isStatsWeightsBlob(blob);
      if (hasAdapter) {
        if (runId === undefined || remote.adapterShare === undefined) return Promise.reject(new AppError(ErrorCode.VALIDATION, `version ${version}: remote inference without a run and an adapter share cannot sample new weights`));
        checkAdapterPublished(remote.adapterShare, runId, version);
      }
      source.setVersion(version, hasAdapter);
      logger.info({ version, adapter: hasAdapter ? adapters.servedName(version) : null }, 'policy version switched');
      return Promise.resolve();
    },
    close: () => adapters.unloadAll(),
  };
}
