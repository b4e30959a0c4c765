export { ActionType, actionTypes, stepActionTypes, PARSE_ERROR_ACTION, type ParseErrorAction, MAX_ARGUMENT_CHARS, SqlActionSchema, type SqlAction } from './sql-action.ts';
export {
  SqlObservationSchema,
  StepResultSchema,
  RewardBreakdownSchema,
  StepInfoSchema,
  StepOutcomeSchema,
  type SqlObservation,
  type StepResult,
  type RewardBreakdown,
  type StepInfo,
  type StepOutcome,
} from './sql-observation.ts';
export {
  AnswerType,
  answerTypes,
  Difficulty,
  difficulties,
  SplitName,
  CellSchema,
  QuestionRecordSchema,
  type Cell,
  type QuestionRecord,
} from './question.ts';
export { ResetOptionsSchema, EpisodeStateSchema, type ResetOptions, type EpisodeState } from './episode.ts';
export { toJsonSchema, openEnvSchemas } from './json-schema.ts';
export * from './openenv-frames.ts';
export * from './episode-job.ts';
export * from './trajectory.ts';
export { fastSqlAction, fastResetOptions } from './fast-parse.ts';
export * from './training-sequence.ts';
export { BatchStatsSchema, type BatchStats } from './batch-stats.ts';
export * from './completions.ts';
