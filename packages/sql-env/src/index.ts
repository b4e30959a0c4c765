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
export { verifyAnswer, formatGoldAnswer, deriveAnswerType, normaliseAnswerText, type GoldAnswer, type Verdict } from './verifier/index.ts';
export { generateBuiltinDataset, builtinDatasetDir, builtinDomains, readBuiltinManifest, BuiltinDatasetOptionsSchema, DEFAULT_BUILTIN_SEED, BUILTIN_GENERATOR_VERSION, type BuiltinDatasetOptions, type BuiltinDatasetSummary, type BuiltinDomainSummary, type BuiltinDomainInfo } from './builtin/index.ts';
