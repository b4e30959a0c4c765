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
