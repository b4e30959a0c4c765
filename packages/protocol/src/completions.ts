import { z } from 'zod';

/**
 * The slice of vLLM's OpenAI-compatible server (vLLM >= 0.10.2) that remote
 * rollouts use, field names exactly as vLLM spells them (docs/remote-inference.md).
 *
 * Requests are read by a server, so the request schemas carry vLLM's defaults
 * and ignore unknown fields the way vLLM does. A client must still send EVERY
 * sampling field (type its body as `CompletionRequest`, the parsed type where
 * nothing is optional): vLLM fills an absent field from the model's
 * generation_config, not from these defaults.
 *
 * Responses are read by a client from a server it does not control, so their
 * schemas require every field the rollout relies on and check the invariants
 * (one log-prob per sampled token); unknown extra fields are dropped, since
 * vLLM versions add fields (`service_tier`, `kv_transfer_params`, ...).
 */

const tokenId = z.number().int().nonnegative();
const count = z.number().int().nonnegative();

/** vLLM's `top_k` off values: -1 (current) and 0 (accepted as off too). */
export const TOP_K_OFF = -1;

/** `POST /v1/completions` body. `prompt` is the episode's whole context as token ids. */
export const CompletionRequestSchema = z.object({
  /** Served model name: the base model, or `<run>-v<N>` for a policy version's adapter. */
  model: z.string().min(1),
  prompt: z.array(tokenId).min(1),
  max_tokens: z.number().int().positive().default(16),
  temperature: z.number().nonnegative().default(1),
  top_p: z.number().gt(0).lte(1).default(1),
  /** -1 (or 0) = off. */
  top_k: z.number().int().gte(-1).default(TOP_K_OFF),
  min_p: z.number().gte(0).lte(1).default(0),
  repetition_penalty: z.number().gt(0).default(1),
  n: z.number().int().positive().default(1),
  seed: z.number().int().nullable().default(null),
  /** Number of top log-probs per token besides the sampled one's; 0 = the sampled token's only, null = none. */
  logprobs: z.number().int().nonnegative().nullable().default(null),
  return_token_ids: z.boolean().default(false),
  stop_token_ids: z.array(tokenId).default([]),
  skip_special_tokens: z.boolean().default(true),
  /** Partitions the prefix cache: requests with different salts never share cached blocks. */
  cache_salt: z.string().min(1).nullable().default(null),
  stream: z.boolean().default(false),
});
export type CompletionRequest = z.output<typeof CompletionRequestSchema>;
export type CompletionRequestInput = z.input<typeof CompletionRequestSchema>;

export const FinishReason = { STOP: 'stop', LENGTH: 'length' } as const;
export type FinishReason = (typeof FinishReason)[keyof typeof FinishReason];

/** OpenAI legacy-completions log-probs of the sampled tokens (vLLM's `CompletionLogProbs`). */
export const CompletionLogprobsSchema = z.object({
  token_logprobs: z.array(z.number()),
  tokens: z.array(z.string()),
  top_logprobs: z.array(z.record(z.string(), z.number()).nullable()).nullable(),
  text_offset: z.array(count),
});
export type CompletionLogprobs = z.output<typeof CompletionLogprobsSchema>;

export const CompletionChoiceSchema = z
  .object({
    index: count,
    text: z.string(),
    /** Sampled ids, including the stop token when one was sampled; null unless `return_token_ids`. */
    token_ids: z.array(tokenId).nullable(),
    /** The prompt as the server read it; null unless `return_token_ids`. */
    prompt_token_ids: z.array(tokenId).nullable(),
    logprobs: CompletionLogprobsSchema.nullable(),
    finish_reason: z.enum([FinishReason.STOP, FinishReason.LENGTH]).nullable(),
    /** The stop token id (or stop string) that ended the completion; null at EOS or length. */
    stop_reason: z.union([tokenId, z.string()]).nullable(),
  })
  .superRefine((choice, ctx) => {
    const lp = choice.logprobs;
    if (lp === null || choice.token_ids === null) return;
    if (lp.token_logprobs.length !== choice.token_ids.length) {
      ctx.addIssue({
        code: 'custom',
        path: ['logprobs', 'token_logprobs'],
        message: `${lp.token_logprobs.length} log-probs for ${choice.token_ids.length} token ids`,
      });
    }
  });
export type CompletionChoice = z.output<typeof CompletionChoiceSchema>;

export const CompletionUsageSchema = z.object({
  prompt_tokens: count,
  completion_tokens: count,
  total_tokens: count,
});
export type CompletionUsage = z.output<typeof CompletionUsageSchema>;

export const CompletionResponseSchema = z.object({
  id: z.string(),
  object: z.literal('text_completion'),
  created: count,
  model: z.string(),
  choices: z.array(CompletionChoiceSchema).min(1),
  usage: CompletionUsageSchema,
});
export type CompletionResponse = z.output<typeof CompletionResponseSchema>;

/** `POST /v1/load_lora_adapter` body; `lora_path` is the adapter directory as the SERVER sees it. */
export const LoadLoraAdapterRequestSchema = z.object({
  lora_name: z.string().min(1),
  lora_path: z.string().min(1),
});
export type LoadLoraAdapterRequest = z.output<typeof LoadLoraAdapterRequestSchema>;

/** `POST /v1/unload_lora_adapter` body. */
export const UnloadLoraAdapterRequestSchema = z.object({
  lora_name: z.string().min(1),
});
export type UnloadLoraAdapterRequest = z.output<typeof UnloadLoraAdapterRequestSchema>;

/** One entry of `GET /v1/models`: the base model has `parent: null`, an adapter its base's id. */
export const ModelCardSchema = z.object({
  id: z.string(),
  object: z.literal('model'),
  created: count,
  owned_by: z.string(),
  root: z.string().nullable(),
  parent: z.string().nullable(),
  max_model_len: count.nullable(),
});
export type ModelCard = z.output<typeof ModelCardSchema>;

export const ModelListSchema = z.object({
  object: z.literal('list'),
  data: z.array(ModelCardSchema),
});
export type ModelList = z.output<typeof ModelListSchema>;

/** The error body every route answers with: `{"object":"error","message",type,param,code}`. */
export const ApiErrorSchema = z.object({
  object: z.literal('error'),
  message: z.string(),
  type: z.string(),
  param: z.string().nullable(),
  code: z.number().int(),
});
export type ApiError = z.output<typeof ApiErrorSchema>;

/** vLLM releases after 0.10 wrap the same fields as `{"error": {...}}`; a client reads both. */
const NestedApiErrorSchema = z.object({
  error: z.object({
    message: z.string(),
    type: z.string(),
    param: z.string().nullable().optional(),
    code: z.union([z.number().int(), z.string()]).nullable().optional(),
  }),
});

/** The error message and type of a non-2xx body (flat or nested shape, or vLLM's auth `{"error":"Unauthorized"}`); null when it is neither. */
export function readApiError(body: unknown): { message: string; type: string } | null {
  const flat = ApiErrorSchema.safeParse(body);
  if (flat.success) return { message: flat.data.message, type: flat.data.type };
  const nested = NestedApiErrorSchema.safeParse(body);
  if (nested.success) return { message: nested.data.error.message, type: nested.data.error.type };
  const auth = z.object({ error: z.string() }).safeParse(body);
  return auth.success ? { message: auth.data.error, type: 'Unauthorized' } : null;
}
