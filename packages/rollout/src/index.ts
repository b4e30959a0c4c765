export type {
  Transport,
  GroupAdmission,
  RunCounters,
  FailedGroup,
  QueueDepth,
  EpisodeAttempt,
  EpisodeProcessor,
  EpisodeEvent,
  EpisodeConsumerOptions,
  GroupScorer,
  GroupConsumerOptions,
  Consumer,
  TrainerCommit,
  CommitResult,
  WeightsRetention,
} from './transport/transport.ts';
export { weightsToPrune } from './transport/weights-retention.ts';
export { checkBatchTrajectories } from './trainer-housekeeping.ts';
export { createHealthCheck, type HealthCheck, type HealthReport, type HealthCheckOptions } from './health.ts';
export { InProcessTransport } from './transport/in-process-transport.ts';
export { BullmqTransport, BullmqTransportConfigSchema, type BullmqTransportConfig, type BullmqTransportConfigInput } from './transport/bullmq-transport.ts';
export { type BlobStore, MemoryBlobStore, DirectoryBlobStore } from './store/blob-store.ts';
export { RedisBlobStore, redisWriteError, type RedisBlobStoreOptions } from './store/redis-blob-store.ts';
export { TrajectoryStore, trajectoryKey } from './store/trajectory-store.ts';
export { groupAdvantages, GRPO_STD_EPS, type GroupAdvantages } from './advantages.ts';
export { scoreGroup, batchStats } from './scoring.ts';
export { groupJobId, episodeJobId, groupPosition, parseEpisodeJobId } from './ids.ts';
export { QuestionSchedule, episodeSeed, type ScheduledQuestion } from './question-schedule.ts';
export { playEpisode, type RolloutEnvironment, type EnvironmentSource, type PlayEpisodeDeps } from './play-episode.ts';
export type { TurnTokens, TokenRecordingEpisode } from '@sqlenv/agents';
export {
  runCoordinator,
  summarizeRun,
  buildSummary,
  buildGroup,
  admissionCapacity,
  occupiedGroups,
  totalGroups,
  type CoordinatorOptions,
  type AdmissionEvent,
  type RunSummary,
} from './coordinator.ts';
export { RolloutWorker, type RolloutWorkerOptions, type RunResources, type ResolveRun } from './rollout-worker.ts';
export {
  runTrainer,
  waitForRun,
  StatsPolicyUpdater,
  isStatsWeightsBlob,
  type PolicyUpdater,
  type PolicyUpdate,
  type TrainingBatch,
  type TrainerOptions,
  type TrainerResult,
  type CommittedVersion,
  type TrainerPhaseSeconds,
} from './trainer.ts';
export { GrpoPolicyUpdater, OPTIMIZER_PART, learnerConfigOf, policySamples, policyUpdaterFor, type ClosablePolicyUpdater } from './grpo-updater.ts';
export { runSynchronous, type SynchronousRunOptions, type SynchronousRunResult } from './synchronous-run.ts';
export { RolloutMetrics } from './metrics.ts';
export { RunAdmin, type RunListing, type RunDetails } from './transport/run-admin.ts';
export { serveRuns, type TrainerLeases, type TrainerPoolOptions } from './trainer-pool.ts';
export { startStatusServer, type StatusServer, type StatusServerOptions } from './status-server.ts';
export { isPermanentFailure, failureReason } from './failure.ts';
export { createPolicy, createRunResolver, remoteEnvironments, RuntimeCache, runtimeOptionsFrom, scheduledQuestions, POLICY_NAMES, type RuntimeOptions } from './resources/run-resources.ts';
export type { ModelExecution } from './resources/execution.ts';
export { runTraining, type TrainingRunOptions, type TrainingRunResult, type HeldOutSettings } from './training-run.ts';
export { renderProgress, sparkline } from './training-progress.ts';
export { transportHealthCheck } from './health.ts';
export { Wakeup } from './wakeup.ts';
export { createModelResources, type ModelResources, type ModelResourcesOptions } from './resources/model-resources.ts';
export { WeightsFollower, type ApplyWeights, type WeightsFollowerOptions } from './weights-follower.ts';
export { redisGlobLiteral } from './transport/run-keys.ts';
