export {
  isPolicyStop,
  recordsTokens,
  type EpisodeContext,
  type Policy,
  type PolicyEpisode,
  type PolicyLane,
  type PolicyMove,
  type PolicyStop,
  type PolicyStopReason,
  type TurnTokens,
  type TokenRecordingEpisode,
} from './policy.ts';
export { OraclePolicy, type QuestionLookup } from './oracle-policy.ts';
export { RandomPolicy, type RandomPolicyOptions } from './random-policy.ts';
export { evaluate, drawQuestionIds, type EvaluateOptions, type EvaluationEnvironment, type EvaluationReport, type EpisodeRecord } from './evaluate.ts';
export { PASS_AT_K, passAtK, passAtKs, passAtKEstimate, type PassAtK, type QuestionOutcome } from './pass-at-k.ts';
export { pairedBootstrap, pairByQuestion, type PairedBootstrapOptions, type PairedDifference, type PairedQuestion, type SeededOutcome } from './paired-bootstrap.ts';
export { transcriptTurn, TranscriptCollector, TranscriptTurnSchema, type TranscriptTurn } from './transcript.ts';
export { runEpisode, type EpisodeEnvironment, type EpisodeRun, type RunEpisodeOptions, type TurnEvent } from './run-episode.ts';
export { tableNamesFromSchemaInfo } from './schema-info.ts';
export { createBaselinePolicy, BASELINE_POLICY_NAMES, type BaselinePolicyName } from './baseline-policies.ts';
export {
  DEFAULT_PROMPT_PATH,
  parseAgentPrompt,
  loadAgentPrompt,
  fillTemplate,
  renderFirstUser,
  renderToolResult,
  type AgentPrompt,
  type AgentTool,
} from './agent-prompt.ts';
export { parseToolCall, type ToolCallParse, type ParseOptions } from './tool-call-parser.ts';
export {
  EngineCompletionSource,
  ScriptedCompletionSource,
  type Completion,
  type CompletionRequest,
  type CompletionSource,
  type EpisodeCompleter,
  type SamplingOptions,
} from './completion-source.ts';
export { checkContextHoldsSystemTurn, LlmPolicy, LlmEpisode, systemTurnIds, type LlmPolicyOptions, type AgentMessage } from './llm-policy.ts';
export { actionToolCall, actionCompletionText, actionCompletionIds, PolicyCompletionSource } from './action-completion.ts';
export * from './remote/index.ts';
