// What callers outside this package use (apps/cli's commands, tests, benchmarks); the rest stays internal.

// The transports and their contract.
export type { Transport, GroupAdmission, EpisodeEvent } from './transport/transport.ts';
export { InProcessTransport } from './transport/in-process-transport.ts';
export { BullmqTransport, BullmqTransportConfigSchema, type BullmqTransportConfigInput } from './transport/bullmq-transport.ts';
export { MemoryBlobStore, DirectoryBlobStore } from './store/blob-store.ts';
export { RedisBlobStore } from './store/redis-blob-store.ts';
export { RunAdmin, type RunListing, type RunDetails } from './transport/run-admin.ts';
export { redisGlobLiteral } from './transport/run-keys.ts';

// The three loops, and the synchronous one they reproduce.
export { runCoordinator, buildGroup, totalGroups, type AdmissionEvent, type RunSummary } from './coordinator.ts';
export { RolloutWorker } from './rollout-worker.ts';
export { runTrainer, waitForRun, StatsPolicyUpdater, type PolicyUpdater, type PolicyUpdate, type TrainingBatch } from './trainer.ts';
export { serveRuns } from './trainer-pool.ts';
export { runSynchronous } from './synchronous-run.ts';
export { GrpoPolicyUpdater, mismatchStats, OPTIMIZER_PART, planLearner, policyUpdaterFor, type LearnerOverrides } from './grpo-updater.ts';
export { WeightsFollower } from './weights-follower.ts';
export { groupAdvantages } from './advantages.ts';
export { scoreGroup, batchStats } from './scoring.ts';
export { episodeJobId, parseEpisodeJobId } from './ids.ts';
export { QuestionSchedule } from './question-schedule.ts';
export { playEpisode } from './play-episode.ts';
export type { TurnTokens, TokenRecordingEpisode } from '@sqlenv/agents';

// A whole training run in one call, and what a process needs to play or train a run.
export { runTraining, type TrainingRunOptions, type TrainingRunResult } from './training-run.ts';
export { RunInterrupted, abortReasonOf, type ResumeFrom } from './training-resume.ts';
export { sparkline } from './training-progress.ts';
export { createRunResolver, RuntimeCache, runtimeOptionsFrom, scheduledQuestions } from './resources/run-resources.ts';
export { createModelResources, type ModelResources } from './resources/model-resources.ts';
export { createRemoteModelResources, type RemoteInferenceOptions, type RemoteModelResourcesOptions } from './resources/remote-model-resources.ts';
export { checkAdapterShareWritable, publishAdapterVersion, publishStartAdapter, sharedAdapterDir } from './resources/adapter-share.ts';
export type { ModelExecution } from './resources/execution.ts';

// Operating a process: metrics, /status and /healthz, wake-ups.
export { RolloutMetrics } from './metrics.ts';
export { startStatusServer, type StatusServer } from './status-server.ts';
export { transportHealthCheck, type HealthCheck } from './health.ts';
export { Wakeup } from './wakeup.ts';
