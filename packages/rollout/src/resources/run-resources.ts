import { BASELINE_POLICY_NAMES, createBaselinePolicy, type Policy } from '@sqlenv/agents';
import { SQLEnvClient } from '@sqlenv/client';
import type { RolloutRunSpec, SqlAction } from '@sqlenv/protocol';
import { createSqlEnvRuntime, type Dataset, type SqlEnvRuntime } from '@sqlenv/sql-env';
import { AppError, ErrorCode, silentLogger, type Logger } from '@sqlenv/shared';
import { createModelResources } from './model-resources.ts';
import { createRemoteModelResources, type RemoteInferenceOptions } from './remote-model-resources.ts';
import type { ModelExecution } from './execution.ts';
import type { EnvironmentSource, RolloutEnvironment } from '../play-episode.ts';
import type { ScheduledQuestion } from '../question-schedule.ts';
import type { ResolveRun } from '../rollout-worker.ts';

/** Policies a worker can play by name: the baselines, and 'model' (the LLM agent; the run spec's `model` section and the worker's `--model DIR`). */
export const POLICY_NAMES = [...BASELINE_POLICY_NAMES, 'model'] as const;

export function createPolicy(name: string, dataset: Dataset, seed: number): Policy {
  return createBaselinePolicy(name, dataset, seed);
}

/** The run's questions: its split, or every question when the dataset has none in that split. */
export function scheduledQuestions(dataset: Dataset, split: RolloutRunSpec['split']): ScheduledQuestion[] {
  const inSplit = dataset.questionsOf(split);
  const chosen = inSplit.length > 0 ? inSplit : dataset.questions;
  return chosen.map((q) => ({ questionId: q.question_id, dbId: q.database_name }));
}

export interface RuntimeOptions {
  cacheDir?: string;
  executorPoolSize?: number;
  executorInProcessMaxMs?: number;
  /** Load datasets without their missing or empty database files (see DatasetLoadConfigSchema). */
  skipMissingDbs?: boolean;
  logger?: Logger;
}

/** RuntimeOptions from parsed command options (unset ones left to the sql-env defaults). */
export function runtimeOptionsFrom(options: { cacheDir?: string | undefined; executorPoolSize?: number | undefined; executorInProcessMaxMs?: number | undefined; skipMissingDbs?: boolean | undefined }, logger: Logger): RuntimeOptions {
  return {
    ...(options.cacheDir === undefined ? {} : { cacheDir: options.cacheDir }),
    ...(options.executorPoolSize === undefined ? {} : { executorPoolSize: options.executorPoolSize }),
    ...(options.executorInProcessMaxMs === undefined ? {} : { executorInProcessMaxMs: options.executorInProcessMaxMs }),
    ...(options.skipMissingDbs === undefined ? {} : { skipMissingDbs: options.skipMissingDbs }),
    logger,
  };
}

/** One SQL runtime (dataset + executor pool) per dataset source, shared by every run that uses it. */
export class RuntimeCache {
  readonly #options: RuntimeOptions;
  readonly #runtimes = new Map<string, Promise<SqlEnvRuntime>>();

  constructor(options: RuntimeOptions = {}) {
    this.#options = options;
  }

  get(dataset: string): Promise<SqlEnvRuntime> {
    let runtime = this.#runtimes.get(dataset);
    if (!runtime) {
      runtime = createSqlEnvRuntime({
        dataset,
        ...(this.#options.cacheDir === undefined ? {} : { cacheDir: this.#options.cacheDir }),
        executor: {
          ...(this.#options.executorPoolSize === undefined ? {} : { poolSize: this.#options.executorPoolSize }),
          ...(this.#options.executorInProcessMaxMs === undefined ? {} : { inProcessMaxMs: this.#options.executorInProcessMaxMs }),
        },
        datasetLoad: { skipMissingDbs: this.#options.skipMissingDbs ?? false },
        logger: this.#options.logger ?? silentLogger,
      });
      // A failed load is not cached: the next run may find the dataset fixed.
      runtime.catch(() => this.#runtimes.delete(dataset));
      this.#runtimes.set(dataset, runtime);
    }
    return runtime;
  }

  async close(): Promise<void> {
    const runtimes = await Promise.allSettled([...this.#runtimes.values()]);
    this.#runtimes.clear();
    await Promise.all(runtimes.map((r) => (r.status === 'fulfilled' ? r.value.close() : undefined)));
  }
}

/**
 * Environments on a remote env-server (`--env-url`): one WebSocket session per
 * episode. The wire carries no step info, so correctness is inferred from the
 * final ANSWER's reward: its terminal part is +1.0 for a correct answer and the
 * dense part is clipped to [−0.10, +0.15] (docs/architecture.md, "The environment").
 */
export function remoteEnvironments(url: string, options: { apiKey?: string } = {}): EnvironmentSource {
  return {
    create: async (): Promise<RolloutEnvironment> => {
      const client = await SQLEnvClient.connect(url, options.apiKey === undefined ? {} : { apiKey: options.apiKey });
      return {
        reset: (resetOptions) => client.reset(resetOptions),
        step: async (action: SqlAction) => {
          const result = await client.step(action);
          if (!result.done) return result;
          const correct = action.action_type === 'ANSWER' && (result.reward ?? 0) >= 0.5;
          return { ...result, correct };
        },
        close: () => client.close(),
      };
    },
  };
}

export interface RunResolverOptions extends RuntimeOptions {
  /** Play against this env-server instead of an in-process environment. */
  envUrl?: string;
  envApiKey?: string;
  /** This process's model directory, for runs with `policy: 'model'` (checked against the spec's fingerprint). */
  modelDir?: string;
  /** Turns batched into one generation run (the worker's concurrency). Default 16. */
  maxBatchSize?: number;
  /** Provider and threads of the model runs' inference engines. */
  execution?: ModelExecution;
  /** Sample model runs on inference servers instead of an in-process engine. */
  remote?: RemoteInferenceOptions;
  /** The in-process engine plays evaluations in lockstep (its `deterministic` option). */
  deterministic?: boolean;
}

/** The worker's ResolveRun: policy + environments for a run's dataset and policy. */
export function createRunResolver(runtimes: RuntimeCache, options: RunResolverOptions = {}): ResolveRun {
  return async (spec) => {
    const runtime = await runtimes.get(spec.dataset);
    const ownReward = Object.keys(spec.reward).length > 0;
    if (ownReward && options.envUrl !== undefined) {
      throw new AppError(ErrorCode.VALIDATION, `run ${spec.run_id} sets its own reward (${JSON.stringify(spec.reward)}), which a remote env-server (--env-url) does not take: play it in process`);
    }
    const environments: EnvironmentSource =
      options.envUrl === undefined
        ? { create: () => runtime.createEnvironment(spec.reward) }
        : remoteEnvironments(options.envUrl, options.envApiKey === undefined ? {} : { apiKey: options.envApiKey });
    if (spec.policy !== 'model') return { policy: createPolicy(spec.policy, runtime.dataset, spec.seed), environments };
    if (spec.model === undefined) throw new AppError(ErrorCode.VALIDATION, `run ${spec.run_id}: policy 'model' without a model section`);
    if (options.modelDir === undefined) throw new AppError(ErrorCode.VALIDATION, `run ${spec.run_id} plays the model policy: start this worker with --model DIR (SQLENV_MODEL_DIR)`);
    const logger = options.logger === undefined ? {} : { logger: options.logger };
    const model =
      options.remote === undefined
        ? await createModelResources(spec.model, options.modelDir, {
            maxBatchSize: options.maxBatchSize ?? 16,
            ...(options.execution === undefined ? {} : { execution: options.execution }),
            ...(options.deterministic === undefined ? {} : { deterministic: options.deterministic }),
            ...logger,
          })
        : await createRemoteModelResources(spec.model, options.modelDir, { remote: options.remote, runId: spec.run_id, maxStaleness: spec.max_staleness, ...logger });
    return { policy: model.policy, environments, applyWeights: model.applyWeights, sampling: model.sampling, release: model.close };
  };
}
