export { coordinatorCommand, coordinatorUsage } from './coordinator-command.ts';
export { workerCommand, workerUsage } from './worker-command.ts';
export { trainerCommand, trainerUsage } from './trainer-command.ts';
export { trainCommand, trainUsage, formatSummary } from './train-command.ts';
export { runsCommand, runsUsage } from './runs-command.ts';
export { runSftCommand, sftCommand, SftOptionsSchema, sftUsage, type SftOptions, type SftSummary } from './sft-command.ts';
export type { RolloutCommandIo } from './command-io.ts';
export { createPolicy, createRunResolver, remoteEnvironments, RuntimeCache, scheduledQuestions, POLICY_NAMES } from './run-resources.ts';
export { environmentVariables } from './environment-variables.ts';
