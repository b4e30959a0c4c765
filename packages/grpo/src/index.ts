// @sqlenv/grpo: the learner — GRPO / SFT training graphs on ONNX Runtime, AdamW on LoRA factors, learner checkpoints.
export {
  LOSS_NORMALISATIONS,
  LR_SCHEDULES,
  LearnerConfigSchema,
  OptimizerConfigSchema,
  PolicyLossConfigSchema,
  parseLearnerConfig,
  type LearnerConfig,
  type LearnerConfigInput,
  type LossNormalisation,
  type OptimizerConfig,
  type PolicyLossConfig,
} from './config.ts';
export { policyLoss, sftLoss, type PolicyLossInputs, type PolicyLossOutputs } from './policy-loss.ts';
export { buildTrainingGraph, keptActivationBytes, RECOMPUTE_ABOVE_BYTES, RECOMPUTE_ESTIMATE_ROW_TOKENS, resolveRecompute, TRAIN_IO, type TrainingGraph, type TrainingGraphOptions, type TrainingObjective } from './training-graph.ts';
export { checkSample, planMicroBatches, tokenWeights, PaddedRows, type PolicySample, type SequenceSample } from './micro-batches.ts';
export { LoraOptimizer, globalNorm, learningRateAt, type GradMap, type OptimizerState, type ParamMap, type StepReport } from './optimizer.ts';
export { logprobMismatch, type LogprobMismatch, type MismatchReport } from './logprob-mismatch.ts';
export { LoraLearner, type LearnerState, type LoraLearnerOptions, type UpdateReport } from './lora-learner.ts';
export { decodeOptimizerState, decodeSftCheckpoint, encodeLearnerState, encodeSftCheckpoint, type EncodedLearnerState, type SftCheckpoint } from './checkpoint.ts';
export { checkSftSample, parseSftLine, readSftExamples, renderSftMessages, type SftLine, type SftMessage } from './sft-examples.ts';
export { runSft, sftBatchLines, type SftEvalReport, type SftRunOptions, type SftStepReport } from './sft-run.ts';
export { runSftJob, type SftJobOptions, type SftSummary } from './sft-job.ts';
export { planLearnerMemory, microBatchActivationBytes, MIN_MICRO_BATCH_TOKENS, type LearnerMemoryPlan, type LearnerMemoryInput } from './learner-memory.ts';
