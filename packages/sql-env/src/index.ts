// The public API of @sqlenv/sql-env. Each folder owner adds the exports of their folder here.
export { EnvConfigSchema, parseEnvConfig, type EnvConfig, type EnvConfigInput, type RewardMode } from './config/env-config.ts';
export type { Dataset, DatabaseInfo, DatabaseTable, DatabaseColumn, GoldFailure, SkippedDatabase } from './dataset/dataset.ts';
export { GoldFailureReason } from './dataset/dataset.ts';
export { loadDataset, defaultCacheDir, BUILTIN_SOURCES, DatasetLoadConfigSchema, type DatasetLoadConfig, type LoadDatasetOptions } from './dataset/load-dataset.ts';
export { checkDataset, DatasetProblemKind, type DatasetCheckReport, type DatasetProblem, type CheckDatasetOptions } from './dataset/check-dataset.ts';
export { tablesInvolved, deriveDifficulty } from './dataset/sql-analysis.ts';
export { SqlEnvironment, type SqlEnvironmentDeps } from './env/sql-environment.ts';
export { SampleCache } from './env/sample-cache.ts';
export { renderResult, renderRows } from './env/render-result.ts';
export { createSqlEnvRuntime, type SqlEnvRuntime, type SqlEnvRuntimeOptions } from './runtime.ts';
export {
  RewardConfigSchema,
  parseRewardConfig,
  profileGold,
  scorePotential,
  createRewardTracker,
  combineBreakdowns,
  actionKey,
  normaliseSql,
  type RewardConfig,
  type RewardConfigInput,
  type GoldProfile,
  type PotentialScore,
  type RewardTracker,
  type RewardStep,
} from './reward/index.ts';
export { verifyAnswer, formatGoldAnswer, deriveAnswerType, normaliseAnswerText, FloatMatch, type GoldAnswer, type Verdict } from './verifier/index.ts';
export * from './sandbox/index.ts';
export { generateBuiltinDataset, builtinDatasetDir, builtinDomains, readBuiltinManifest, BuiltinDatasetOptionsSchema, DEFAULT_BUILTIN_SEED, BUILTIN_GENERATOR_VERSION, type BuiltinDatasetOptions, type BuiltinDatasetSummary, type BuiltinDomainSummary, type BuiltinDomainInfo } from './builtin/index.ts';
