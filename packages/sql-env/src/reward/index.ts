export { RewardConfigSchema, parseRewardConfig, type RewardConfig, type RewardConfigInput } from './reward-config.ts';
export { profileGold, valueKey, type GoldProfile, type NumericRange, type ValueKey } from './gold-profile.ts';
export { scorePotential, binPotential, cardinalityMatch, endpointAgreement, type PotentialScore } from './potential.ts';
export { actionKey, normaliseSql, normaliseTableName, type DenseActionType } from './action-key.ts';
export { createRewardTracker, combineBreakdowns, type RewardTracker, type RewardStep } from './reward-tracker.ts';
