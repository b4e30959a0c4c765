import { AppError, ErrorCode } from '@sqlenv/shared';
import { parseModelConfig, type ModelConfig, type ModelConfigInput } from './config.ts';
import { BYTE_TOKENIZER_VOCAB_SIZE, BYTE_SPECIAL_IDS } from '../tokenizer/byte-tokenizer.ts';

/**
 * Named configs. The tiny ones pair with the byte-level tokenizer (vocab 272)
 * and are small enough for unit tests; the real-shaped ones copy the
 * published config.json of each checkpoint (random weights only: nothing is
 * downloaded).
 */
const tinyCommon = {
  vocabSize: BYTE_TOKENIZER_VOCAB_SIZE,
  hiddenSize: 64,
  numLayers: 2,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 16,
  intermediateSize: 128,
  ropeTheta: 10_000,
  rmsNormEps: 1e-6,
  maxPositionEmbeddings: 2048,
  eosTokenIds: [BYTE_SPECIAL_IDS['<|im_end|>'], BYTE_SPECIAL_IDS['<|endoftext|>']],
  padTokenId: BYTE_SPECIAL_IDS['<|endoftext|>'],
} satisfies Partial<ModelConfigInput>;

/** Qwen special ids (docs/architecture.md, "Models and the runtime"): `<|im_end|>` ends a chat turn. */
const QWEN_EOS = [151645, 151643];

const PRESETS = {
  'tiny-qwen2': { ...tinyCommon, architecture: 'qwen2', qkvBias: true, tieWordEmbeddings: true },
  'tiny-qwen3': { ...tinyCommon, architecture: 'qwen3', qkNorm: true, tieWordEmbeddings: true, headDim: 24 },
  'tiny-llama': { ...tinyCommon, architecture: 'llama', tieWordEmbeddings: false, numKvHeads: 1 },
  // https://huggingface.co/Qwen/Qwen3-0.6B/blob/main/config.json
  'qwen3-0.6b': {
    architecture: 'qwen3',
    vocabSize: 151_936,
    hiddenSize: 1024,
    numLayers: 28,
    numHeads: 16,
    numKvHeads: 8,
    headDim: 128,
    intermediateSize: 3072,
    ropeTheta: 1_000_000,
    rmsNormEps: 1e-6,
    tieWordEmbeddings: true,
    qkNorm: true,
    maxPositionEmbeddings: 40_960,
    eosTokenIds: QWEN_EOS,
    padTokenId: 151643,
  },
  // https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct/blob/main/config.json
  'qwen2.5-0.5b': {
    architecture: 'qwen2',
    vocabSize: 151_936,
    hiddenSize: 896,
    numLayers: 24,
    numHeads: 14,
    numKvHeads: 2,
    headDim: 64,
    intermediateSize: 4864,
    ropeTheta: 1_000_000,
    rmsNormEps: 1e-6,
    tieWordEmbeddings: true,
    qkvBias: true,
    maxPositionEmbeddings: 32_768,
    eosTokenIds: QWEN_EOS,
    padTokenId: 151643,
  },
  // https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct/blob/main/config.json
  'smollm2-135m': {
    architecture: 'llama',
    vocabSize: 49_152,
    hiddenSize: 576,
    numLayers: 30,
    numHeads: 9,
    numKvHeads: 3,
    headDim: 64,
    intermediateSize: 1536,
    ropeTheta: 100_000,
    rmsNormEps: 1e-5,
    tieWordEmbeddings: true,
    maxPositionEmbeddings: 8192,
    eosTokenIds: [2],
    padTokenId: 2,
  },
} as const satisfies Record<string, ModelConfigInput>;

export type PresetName = keyof typeof PRESETS;
export const PRESET_NAMES = Object.keys(PRESETS) as PresetName[];

export function isPresetName(name: string): name is PresetName {
  return Object.hasOwn(PRESETS, name);
}

/** A preset's config, optionally with fields overridden (validated again). */
export function presetConfig(name: string, overrides: Partial<ModelConfigInput> = {}): ModelConfig {
  if (!isPresetName(name)) {
    throw new AppError(ErrorCode.MODEL, `unknown model preset "${name}": expected one of ${PRESET_NAMES.join(', ')}`);
  }
  const preset: ModelConfigInput = { ...PRESETS[name], eosTokenIds: [...PRESETS[name].eosTokenIds] };
  return parseModelConfig({ ...preset, ...overrides });
}
