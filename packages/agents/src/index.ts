export type { EpisodeContext, Policy, PolicyEpisode } from './policy.ts';
export { OraclePolicy, type QuestionLookup } from './oracle-policy.ts';
export { RandomPolicy, type RandomPolicyOptions } from './random-policy.ts';
export { evaluate, type EvaluateOptions, type EvaluationEnvironment, type EvaluationReport, type EpisodeRecord } from './evaluate.ts';
export { tableNamesFromSchemaInfo } from './schema-info.ts';
export { createRng, mixSeeds, hashString } from './prng.ts';
export { createBaselinePolicy, BASELINE_POLICY_NAMES, type BaselinePolicyName } from './baseline-policies.ts';
