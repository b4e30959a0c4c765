export {
  RUN_SPEC_FILE,
  RUN_METRICS_FILE,
  EVALS_DIR,
  ADAPTERS_DIR,
  REPORT_FILE,
  SFT_DIR,
  SFT_DATA_FILE,
  SFT_STEPS_FILE,
  LEARN_RESULT_FILE,
  RUN_COMMAND_FILE,
  RUN_LOCK_FILE,
  RUN_CHECKPOINT_DIR,
  adapterVersionDir,
  savedEvalPath,
  sftOutputDir,
} from './run-files.ts';
export { UpdateStatsSchema, RunMetricsLineSchema, runMetricsLine, trajectoryMetrics, type UpdateStats, type RunMetricsLine, type RunMetricsInput } from './run-metrics.ts';
export {
  SavedEvalSchema,
  SavedEvalEpisodeSchema,
  EvalNameSchema,
  savedEvalFromReport,
  writeSavedEval,
  checkSavedEvalTarget,
  readSavedEvals,
  successInterval,
  wilsonInterval,
  passAtKOf,
  pairedDifferenceOf,
  type SavedEval,
  type SavedEvalEpisode,
  type SavedEvalMeta,
} from './saved-eval.ts';
export { RunRecorder, saveAdapterVersion, writeAdapterBlobDir, readRunMetrics, type RunRecorderOptions, type RecordedVersion } from './run-directory.ts';
export { renderRunReport, writeRunReport, writeRunSpec, pickEvalPair, type RunReportInput } from './run-report.ts';
export { evaluateIntoRunDir, type RunEvaluationOptions } from './run-evaluation.ts';
export { claimRunDir, readRunCommand, writeRunCommand, acquireLock, lockIsLive, RunCommandSchema, type ClaimMode, type RunDirClaim, type RunCommand, type RunLock } from './run-ownership.ts';
export { writeResumePoint, readResumePoint, ResumePointSchema, type ResumePoint, type SavedResumePoint } from './run-checkpoint.ts';
