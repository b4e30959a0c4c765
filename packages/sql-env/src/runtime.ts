import { silentLogger, type Logger } from '@sqlenv/shared';
import { SqlExecutor, type ExecutorConfig } from './sandbox/index.ts';
import { parseEnvConfig, type EnvConfig, type EnvConfigInput } from './config/env-config.ts';
import type { RewardConfigInput } from './reward/reward-config.ts';
import type { Dataset } from './dataset/dataset.ts';
import { loadDataset, type DatasetLoadConfig } from './dataset/load-dataset.ts';
import { SampleCache } from './env/sample-cache.ts';
import { SqlEnvironment } from './env/sql-environment.ts';

export interface SqlEnvRuntimeOptions {
  /** 'builtin' (generated into the cache dir) or a Spider-layout directory. */
  dataset: 'builtin' | string;
  /** Where the builtin dataset and gold caches live; default `<os tmpdir>/sqlenv-cache`. */
  cacheDir?: string;
  executor?: Partial<ExecutorConfig>;
  env?: EnvConfigInput;
  /** Gold-query settings of the dataset load (timeout, row cap, concurrency). */
  datasetLoad?: Partial<Omit<DatasetLoadConfig, 'cacheDir'>>;
  logger?: Logger;
}

export interface SqlEnvRuntime {
  readonly dataset: Dataset;
  readonly executor: SqlExecutor;
  /** The parsed episode config every environment of this runtime uses. */
  readonly config: EnvConfig;
  /**
   * A new environment sharing the dataset, executor and SAMPLE cache. Cheap: create one per concurrent
   * episode. `reward` overrides reward settings for this environment only (a training run's own reward;
   * an invalid setting is an AppError VALIDATION naming it).
   */
  createEnvironment(reward?: RewardConfigInput): SqlEnvironment;
  /** Close the executor pool. Idempotent. */
  close(): Promise<void>;
}

/**
 * Everything an app needs to play episodes: the executor pool, the loaded
 * dataset and a factory of environments. Used by the server, the rollout
 * workers and the CLI.
 */
export async function createSqlEnvRuntime(options: SqlEnvRuntimeOptions): Promise<SqlEnvRuntime> {
  const logger = options.logger ?? silentLogger;
  // Validate the episode config before starting processes or loading anything.
  const config = parseEnvConfig(options.env);
  const executor = new SqlExecutor({ ...options.executor, logger: logger.child({ component: 'sql-executor' }) });
  let dataset: Dataset;
  try {
    dataset = await loadDataset(options.dataset, {
      ...options.datasetLoad,
      ...(options.cacheDir === undefined ? {} : { cacheDir: options.cacheDir }),
      executor,
      logger,
    });
  } catch (error) {
    await executor.close();
    throw error;
  }
  const sampleCache = new SampleCache();
  // A run's reward override is parsed once (environments are made per episode), then reused.
  const withReward = new WeakMap<RewardConfigInput, EnvConfig>();
  const configWith = (reward: RewardConfigInput | undefined): EnvConfig => {
    if (reward === undefined || Object.keys(reward).length === 0) return config;
    let merged = withReward.get(reward);
    if (merged === undefined) {
      merged = parseEnvConfig({ ...config, reward: { ...config.reward, ...reward } });
      withReward.set(reward, merged);
    }
    return merged;
  };
  const envLogger = logger.child({ component: 'sql-env' });
  let closing: Promise<void> | undefined;
  return {
    dataset,
    executor,
    config,
    createEnvironment: (reward) => new SqlEnvironment({ dataset, executor, config: configWith(reward), logger: envLogger, sampleCache }),
    close: () => {
      closing ??= executor.close();
      return closing;
    },
  };
}
