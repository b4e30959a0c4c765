// @sqlenv/model: Qwen/Llama-family decoder on @sqlenv/onnx-graph.
export { Architecture, MODEL_SIZE_LIMITS, modelConfigSchema, parseModelConfig, parseHfConfig, toHfConfig, type ModelConfig, type ModelConfigInput } from './io/config.ts';
export { presetConfig, isPresetName, PRESET_NAMES, type PresetName } from './io/presets.ts';
export {
  SafetensorsCheckpoint,
  readSafetensorsHeader,
  readTensorF32,
  writeSafetensorsFile,
  encodeSafetensors,
  decodeSafetensors,
  writeSafetensorsCheckpoint,
  StoredDtype,
  type TensorInfo,
  type TensorToWrite,
  type F32Tensor,
  checkFinite,
  F32_MAX,
} from './io/safetensors.ts';
export { expectedTensorSpecs, loadModel, loadModelWeights, readModelConfig, type ModelWeights, type TensorSpec } from './io/weights.ts';
export { randomTensors, randomWeights, writeRandomCheckpoint, type RandomCheckpointOptions } from './io/random-checkpoint.ts';
export { referenceForward } from './graphs/reference-forward.ts';
export { CHAT_SPECIAL_TOKENS, type TextTokenizer, type ChatSpecialToken } from './tokenizer/tokenizer.ts';
export { ByteTokenizer, BYTE_SPECIAL_IDS, BYTE_TOKENIZER_VOCAB_SIZE } from './tokenizer/byte-tokenizer.ts';
export { HfTokenizer, loadHfTokenizer, loadBundledQwenTokenizer, bundledQwenTokenizerPaths } from './tokenizer/hf-tokenizer.ts';
export {
  ChatFormat,
  pythonJsonDumps,
  renderSystemText,
  renderAssistantText,
  renderToolCallText,
  renderToolResponsesText,
  type ChatMessage,
  type ChatFormatOptions,
  type ToolCall,
  type ToolDefinition,
} from './tokenizer/chat-template.ts';
export {
  LORA_TARGETS,
  loraConfigSchema,
  parseLoraConfig,
  loraTensorSpecs,
  loraTensorName,
  zeroLoraWeights,
  initLoraWeights,
  validateLoraWeights,
  mergeLora,
  type LoraConfig,
  type LoraConfigInput,
  type LoraTarget,
  type LoraTensorSpec,
  type LoraWeights,
  checkLoraFits,
  checkSameLora,
  MAX_LORA_SCALE,
} from './graphs/lora.ts';
export {
  attentionBiasAndPositions,
  declareDecoderParams,
  decoderForward,
  embedTokens,
  lmHeadLogits,
  rmsNorm,
  type DecoderBuildOptions,
  type DecoderParams,
  type DecoderRecompute,
  type ModelFloat,
  type KvCache,
} from './graphs/decoder.ts';
export { IO, buildDecoderTrunk, buildLogitsGraph, buildScoringGraph, type ForwardGraph, type ForwardGraphOptions, type ScoringGraphOptions } from './graphs/forward-graphs.ts';
export { DEFAULT_PREFILL_CHUNK_TOKENS, GEN_IO, buildGenerationGraph, type GenerationGraph, type GenerationGraphOptions } from './graphs/generation-graph.ts';
export { estimateGenerationMemory, type GenerationMemoryEstimate, type GenerationMemoryShape } from './memory/attention-memory.ts';
export { buildDecodeStepGraph, JsLoopGreedyDecoder, STEP_IO } from './graphs/decode-step-graph.ts';
export { sampleNextToken, type SamplerInputs, type SampledToken } from './graphs/sampler-graph.ts';
export { leftPad, uniformsForSeed, type PaddedBatch } from './runtime/batch.ts';
export { Generator, type GenerateOptions, type GenerationRequest, type GenerationResult, type GeneratorOptions, type RowInput, type RowOutput, type RunRowsOptions } from './runtime/generator.ts';
export { kvBytesPerToken, type RowKvCache } from './runtime/kv-cache.ts';
export { prepackingDecision, PREPACKING_MAX_WEIGHT_BYTES, weightBytes, type PrepackingDecision } from './runtime/prepacking.ts';
export { type SchedulerStats } from './runtime/scheduler-stats.ts';
export { Scorer, LogitsModel, type ScorerOptions } from './runtime/scorer.ts';
export { InferenceEngine, replicaPlan, REPLICA_MAX_WEIGHT_BYTES, REPLICA_MIN_ROWS, type EngineStats } from './runtime/inference-engine.ts';
export {
  engineOptionsSchema,
  experimentalEngineOptionsSchema,
  publicEngineOptionsSchema,
  turnSchedulingDefaults,
  type EngineOptions,
  type ExperimentalEngineOptions,
  type InferenceEngineOptions,
  type PublicEngineOptions,
} from './runtime/engine-options.ts';
export type { TurnRequest, TurnResult } from './runtime/executor.ts';
export type { EngineLane } from './runtime/inference-engine.ts';
export {
  modelInit,
  modelLogits,
  modelGenerate,
  resolveConfigArg,
  parseTokenList,
  type ModelInitArgs,
  type ModelInitResult,
  type ModelLogitsArgs,
  type ModelGenerateArgs,
  type ModelGenerateResult,
} from './tasks/model-tasks.ts';
export {
  ADAPTER_CONFIG_FILE,
  ADAPTER_WEIGHTS_FILE,
  decodeAdapter,
  encodeAdapter,
  loadAdapterDir,
  loraConfigFromPeft,
  peftAdapterConfig,
  saveAdapterDir,
  type Adapter,
} from './io/peft-adapter.ts';
export { trainByteLevelBpe, byteLevelAlphabet, BpeTrainerOptionsSchema, type BpeTrainerOptions, type TrainedBpe } from './tokenizer/bpe-trainer.ts';
export { modelFingerprint, hasThinkTemplate, loadChatFormat, tokenizerFor } from './io/model-dir.ts';
export { modelTokenizer, type ModelTokenizerArgs, type ModelTokenizerResult } from './tasks/tokenizer-task.ts';
export { checkModelFits, countParameters, estimateModelMemory, formatBytes, largestTensor, memoryBoundBytes, MAX_TENSOR_ELEMENTS, type MemoryEstimate, type MemoryEstimateOptions } from './memory/memory-estimate.ts';
export { DEFAULT_KV_CACHE_MAX_BYTES, defaultKvCacheBytes, KV_SHARE_OF_FREE_MEMORY, planEngineMemory, type EngineMemoryPlan, type EngineMemoryPlanInput } from './memory/engine-memory-plan.ts';
export { validateTokenizerIds } from './tokenizer/hf-tokenizer.ts';
