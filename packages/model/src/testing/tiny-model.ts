import type { ModelConfigInput } from '../io/config.ts';

/**
 * A one-layer Qwen3-shaped decoder over the byte tokenizer (272 ids): a checkpoint of it is
 * written and run in milliseconds. The context is long (8,192) because byte tokens are short: an
 * agent's system turn alone is about 1,200 of them, an oracle episode about 2,500.
 */
export const TINY_BYTE_MODEL_CONFIG: ModelConfigInput = {
  architecture: 'qwen3',
  vocabSize: 272,
  hiddenSize: 32,
  numLayers: 1,
  numHeads: 2,
  numKvHeads: 1,
  headDim: 16,
  intermediateSize: 64,
  ropeTheta: 10_000,
  rmsNormEps: 1e-6,
  maxPositionEmbeddings: 8192,
  eosTokenIds: [258, 256],
  padTokenId: 256,
  qkNorm: true,
  tieWordEmbeddings: true,
};
