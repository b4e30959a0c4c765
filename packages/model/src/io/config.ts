import { z } from 'zod';
import { AppError, ErrorCode, formatZodIssues } from '@sqlenv/shared';

/**
 * The one typed model config. Every field that a Hugging Face `config.json`
 * of a supported family carries is normalised into this shape by
 * `parseHfConfig`; the graph builders and the reference forward pass read
 * only this. Defaults live here and nowhere else.
 */
export const Architecture = { qwen2: 'qwen2', qwen3: 'qwen3', llama: 'llama' } as const;
export type Architecture = (typeof Architecture)[keyof typeof Architecture];

/**
 * Upper bounds on a config's sizes, far above any supported checkpoint (Qwen3-0.6B: 28 layers,
 * vocab 151,936, hidden 1,024) but far below what exhausts memory before any check could run: a
 * config.json with 3,000,000 layers must be refused by field, not by an out-of-memory abort.
 * Combinations within these bounds are checked against memory by checkModelFits.
 */
export const MODEL_SIZE_LIMITS = {
  vocabSize: 4_194_304,
  hiddenSize: 65_536,
  numLayers: 1_024,
  numHeads: 1_024,
  headDim: 4_096,
  intermediateSize: 1_048_576,
  maxPositionEmbeddings: 1 << 30,
} as const;
const L = MODEL_SIZE_LIMITS;

export const modelConfigSchema = z
  .object({
    /** Decoder family: decides biases and q/k norms. */
    architecture: z.enum(['qwen2', 'qwen3', 'llama']),
    /** Vocabulary size (rows of the embedding). */
    vocabSize: z.number().int().positive().max(L.vocabSize),
    /** Residual stream width. */
    hiddenSize: z.number().int().positive().max(L.hiddenSize),
    /** Number of decoder layers. */
    numLayers: z.number().int().positive().max(L.numLayers),
    /** Query heads. */
    numHeads: z.number().int().positive().max(L.numHeads),
    /** Key/value heads (GQA); must divide numHeads. */
    numKvHeads: z.number().int().positive().max(L.numHeads),
    /** Per-head width; Qwen3 decouples it from hiddenSize / numHeads. */
    headDim: z.number().int().positive().max(L.headDim),
    /** SwiGLU inner width. */
    intermediateSize: z.number().int().positive().max(L.intermediateSize),
    /** RoPE base θ (Qwen: 1e6; Llama-2: 1e4; SmolLM2: 1e5). */
    ropeTheta: z.number().positive().default(10_000),
    /** RMSNorm ε. */
    rmsNormEps: z.number().positive().default(1e-6),
    /** lm_head shares the embedding matrix. */
    tieWordEmbeddings: z.boolean().default(true),
    /** q/k/v projections have biases (Qwen2: always). */
    qkvBias: z.boolean().default(false),
    /** o projection has a bias (Llama/Qwen3 with attention_bias: true). */
    oBias: z.boolean().default(false),
    /** RMSNorm over head_dim on q and k before RoPE (Qwen3). */
    qkNorm: z.boolean().default(false),
    /** Longest position the checkpoint was trained for (not enforced by the graphs). */
    maxPositionEmbeddings: z.number().int().positive().max(L.maxPositionEmbeddings).default(32_768),
    /** Token ids that end a generation (chat end-of-turn and end-of-text). */
    eosTokenIds: z.array(z.number().int().nonnegative()).default([]),
    /** Padding id used for left padding (any valid id works; it is masked). */
    padTokenId: z.number().int().nonnegative().default(0),
  })
  .refine((c) => c.numHeads % c.numKvHeads === 0, { message: 'numHeads must be a multiple of numKvHeads' })
  .refine((c) => c.headDim % 2 === 0, { message: 'headDim must be even (rotate-half RoPE)' })
  .refine((c) => c.padTokenId < c.vocabSize && c.eosTokenIds.every((id) => id < c.vocabSize), {
    message: 'padTokenId and eosTokenIds must be < vocabSize',
  });

export type ModelConfig = z.infer<typeof modelConfigSchema>;
export type ModelConfigInput = z.input<typeof modelConfigSchema>;

/** Validate a (partial-with-defaults) config; throws AppError(MODEL) naming each bad field. */
export function parseModelConfig(input: unknown): ModelConfig {
  const result = modelConfigSchema.safeParse(input);
  if (!result.success) {
    throw new AppError(ErrorCode.MODEL, `invalid model config: ${formatZodIssues(result.error)}`, {
      details: { issues: result.error.issues },
    });
  }
  return result.data;
}

/**
 * The subset of a Hugging Face `config.json` we read. Unknown keys pass
 * through (checkpoints carry many we do not need), but anything that would
 * change the math and that we do not implement is rejected below.
 */
const hfConfigSchema = z
  .object({
    architectures: z.array(z.string()).optional(),
    model_type: z.string().optional(),
    vocab_size: z.number().int().positive().max(L.vocabSize),
    hidden_size: z.number().int().positive().max(L.hiddenSize),
    num_hidden_layers: z.number().int().positive().max(L.numLayers),
    num_attention_heads: z.number().int().positive().max(L.numHeads),
    num_key_value_heads: z.number().int().positive().max(L.numHeads).optional(),
    head_dim: z.number().int().positive().max(L.headDim).nullish(),
    intermediate_size: z.number().int().positive().max(L.intermediateSize),
    rope_theta: z.number().positive().optional(),
    rms_norm_eps: z.number().positive().optional(),
    tie_word_embeddings: z.boolean().optional(),
    attention_bias: z.boolean().optional(),
    mlp_bias: z.boolean().optional(),
    hidden_act: z.string().optional(),
    rope_scaling: z.unknown().optional(),
    max_position_embeddings: z.number().int().positive().max(L.maxPositionEmbeddings).optional(),
    eos_token_id: z.union([z.number().int(), z.array(z.number().int())]).nullish(),
    pad_token_id: z.number().int().nullish(),
    bos_token_id: z.number().int().nullish(),
    torch_dtype: z.string().optional(),
  })
  .loose();

/** HF class name → our family (model_type is the fallback). */
const ARCHITECTURE_BY_CLASS: Record<string, Architecture> = {
  Qwen2ForCausalLM: 'qwen2',
  Qwen3ForCausalLM: 'qwen3',
  LlamaForCausalLM: 'llama',
};
const ARCHITECTURE_BY_MODEL_TYPE: Record<string, Architecture> = { qwen2: 'qwen2', qwen3: 'qwen3', llama: 'llama' };

/** Normalise a Hugging Face `config.json` object into a ModelConfig. */
export function parseHfConfig(json: unknown): ModelConfig {
  const parsed = hfConfigSchema.safeParse(json);
  if (!parsed.success) {
    throw new AppError(ErrorCode.MODEL, `invalid config.json: ${formatZodIssues(parsed.error)}`, {
      details: { issues: parsed.error.issues },
    });
  }
  const hf = parsed.data;
  const className = hf.architectures?.[0];
  const architecture =
    (className === undefined ? undefined : ARCHITECTURE_BY_CLASS[className]) ??
    (hf.model_type === undefined ? undefined : ARCHITECTURE_BY_MODEL_TYPE[hf.model_type]);
  if (architecture === undefined || (className !== undefined && ARCHITECTURE_BY_CLASS[className] === undefined)) {
    throw new AppError(
      ErrorCode.MODEL,
      `unsupported architecture ${JSON.stringify(className ?? hf.model_type ?? null)}: expected one of ${Object.keys(ARCHITECTURE_BY_CLASS).join(', ')}`,
    );
  }
  if (hf.rope_scaling !== undefined && hf.rope_scaling !== null) {
    throw new AppError(ErrorCode.MODEL, `unsupported rope_scaling ${JSON.stringify(hf.rope_scaling)}: only plain RoPE is implemented`);
  }
  if (hf.hidden_act !== undefined && hf.hidden_act !== 'silu') {
    throw new AppError(ErrorCode.MODEL, `unsupported hidden_act "${hf.hidden_act}": only silu (SwiGLU) is implemented`);
  }
  if (hf.mlp_bias === true) throw new AppError(ErrorCode.MODEL, 'unsupported mlp_bias: true');
  const eos = hf.eos_token_id === undefined || hf.eos_token_id === null ? [] : [hf.eos_token_id].flat();
  const attentionBias = hf.attention_bias ?? false;
  return parseModelConfig({
    architecture,
    vocabSize: hf.vocab_size,
    hiddenSize: hf.hidden_size,
    numLayers: hf.num_hidden_layers,
    numHeads: hf.num_attention_heads,
    numKvHeads: hf.num_key_value_heads ?? hf.num_attention_heads,
    headDim: hf.head_dim ?? hf.hidden_size / hf.num_attention_heads,
    intermediateSize: hf.intermediate_size,
    ropeTheta: hf.rope_theta,
    rmsNormEps: hf.rms_norm_eps,
    // transformers defaults tie_word_embeddings to true in PretrainedConfig; Llama overrides it to false.
    tieWordEmbeddings: hf.tie_word_embeddings ?? architecture !== 'llama',
    // Qwen2Attention hard-codes bias=True on q/k/v and False on o (modeling_qwen2.py).
    qkvBias: architecture === 'qwen2' ? true : attentionBias,
    oBias: architecture === 'qwen2' ? false : attentionBias,
    qkNorm: architecture === 'qwen3',
    maxPositionEmbeddings: hf.max_position_embeddings,
    eosTokenIds: eos,
    padTokenId: hf.pad_token_id ?? eos[0] ?? undefined,
  });
}

/** The inverse of parseHfConfig: a `config.json` transformers would load. */
export function toHfConfig(config: ModelConfig): Record<string, unknown> {
  const className = { qwen2: 'Qwen2ForCausalLM', qwen3: 'Qwen3ForCausalLM', llama: 'LlamaForCausalLM' }[config.architecture];
  const base: Record<string, unknown> = {
    architectures: [className],
    model_type: config.architecture,
    vocab_size: config.vocabSize,
    hidden_size: config.hiddenSize,
    num_hidden_layers: config.numLayers,
    num_attention_heads: config.numHeads,
    num_key_value_heads: config.numKvHeads,
    head_dim: config.headDim,
    intermediate_size: config.intermediateSize,
    hidden_act: 'silu',
    rope_theta: config.ropeTheta,
    rope_scaling: null,
    rms_norm_eps: config.rmsNormEps,
    tie_word_embeddings: config.tieWordEmbeddings,
    max_position_embeddings: config.maxPositionEmbeddings,
    eos_token_id: config.eosTokenIds.length === 1 ? config.eosTokenIds[0] : config.eosTokenIds,
    pad_token_id: config.padTokenId,
    torch_dtype: 'float32',
  };
  if (config.architecture === 'qwen2') {
    if (!config.qkvBias || config.oBias) {
      throw new AppError(ErrorCode.MODEL, 'a qwen2 config must have qkvBias true and oBias false (as transformers builds it)');
    }
  } else {
    if (config.qkvBias !== config.oBias) {
      throw new AppError(ErrorCode.MODEL, `${config.architecture}: attention_bias sets q/k/v and o biases together`);
    }
    base['attention_bias'] = config.qkvBias;
  }
  if (config.qkNorm !== (config.architecture === 'qwen3')) {
    throw new AppError(ErrorCode.MODEL, 'q/k norm exists exactly in qwen3');
  }
  return base;
}
