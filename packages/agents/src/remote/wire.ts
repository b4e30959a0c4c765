import { z } from 'zod';

/**
 * The part of vLLM's OpenAI-compatible contract (vLLM >= 0.10.2) the remote
 * completion source speaks: field names exactly as vLLM spells them.
 */
export interface CompletionRequestBody {
  model: string;
  prompt: number[];
  max_tokens: number;
  temperature: number;
  top_p: number;
  top_k: number;
  min_p: number;
  repetition_penalty: number;
  n: number;
  seed: number;
  logprobs: number;
  return_token_ids: boolean;
  stop_token_ids: number[];
  skip_special_tokens: boolean;
  cache_salt: string;
}

const tokenId = z.number().int().nonnegative();

export const CompletionChoiceSchema = z.object({
  index: z.number().int().nonnegative(),
  text: z.string(),
  token_ids: z.array(tokenId).nullable(),
  prompt_token_ids: z.array(tokenId).nullable(),
  logprobs: z
    .object({
      token_logprobs: z.array(z.number().nullable()),
      tokens: z.array(z.string()),
      top_logprobs: z.array(z.record(z.string(), z.number()).nullable()).nullable(),
      text_offset: z.array(z.number().int()),
    })
    .nullable(),
  finish_reason: z.string().nullable(),
  stop_reason: z.union([z.number(), z.string(), z.null()]).optional(),
});

export const CompletionResponseSchema = z.object({
  id: z.string(),
  object: z.literal('text_completion'),
  created: z.number(),
  model: z.string(),
  choices: z.array(CompletionChoiceSchema),
  usage: z.object({ prompt_tokens: z.number().int(), completion_tokens: z.number().int(), total_tokens: z.number().int() }).nullable().optional(),
});
export type CompletionResponse = z.infer<typeof CompletionResponseSchema>;

export const ModelCardSchema = z.object({
  id: z.string(),
  object: z.literal('model'),
  root: z.string().nullable().optional(),
  parent: z.string().nullable().optional(),
  max_model_len: z.number().int().nullable().optional(),
});

export const ModelListSchema = z.object({ object: z.literal('list'), data: z.array(ModelCardSchema) });
export type ModelList = z.infer<typeof ModelListSchema>;

/** vLLM's error body: `{object:"error", message, type, param, code}`. */
export const ErrorBodySchema = z.object({ object: z.literal('error'), message: z.string(), type: z.string(), code: z.number().int() });
