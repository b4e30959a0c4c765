import { describe, expect, it } from 'vitest';
import { CompletionRequestSchema, CompletionResponseSchema, readApiError } from './completions.ts';

const response = {
  id: 'cmpl-1',
  object: 'text_completion',
  created: 1,
  model: 'base',
  choices: [
    {
      index: 0,
      text: 'ab',
      token_ids: [5, 2],
      prompt_token_ids: [1, 2, 3],
      logprobs: { token_logprobs: [-0.5, -1], tokens: ['a', 'b'], top_logprobs: null, text_offset: [0, 1] },
      finish_reason: 'stop',
      stop_reason: 2,
    },
  ],
  usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
  service_tier: null,
};

describe('completion schemas', () => {
  it('fills vLLM defaults for omitted request fields', () => {
    const req = CompletionRequestSchema.parse({ model: 'm', prompt: [1, 2] });
    expect(req).toMatchObject({ max_tokens: 16, top_p: 1, top_k: -1, min_p: 0, n: 1, logprobs: null, stop_token_ids: [] });
  });

  it('names the field of a wrongly typed request', () => {
    const parsed = CompletionRequestSchema.safeParse({ model: 'm', prompt: [1], max_tokens: 'ten' });
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues[0]?.path).toEqual(['max_tokens']);
  });

  it('accepts a vLLM response with extra fields', () => {
    expect(CompletionResponseSchema.parse(response).choices[0]?.token_ids).toEqual([5, 2]);
  });

  it('rejects a response with one log-prob too few', () => {
    const bad = structuredClone(response);
    bad.choices[0]!.logprobs.token_logprobs = [-0.5];
    const parsed = CompletionResponseSchema.safeParse(bad);
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues[0]?.message).toMatch(/1 log-probs for 2 token ids/);
  });

  it('reads flat, nested and auth error bodies', () => {
    expect(readApiError({ object: 'error', message: 'x', type: 'NotFoundError', param: null, code: 404 })).toEqual({ message: 'x', type: 'NotFoundError' });
    expect(readApiError({ error: { message: 'y', type: 'BadRequestError', param: null, code: 400 } })).toEqual({ message: 'y', type: 'BadRequestError' });
    expect(readApiError({ error: 'Unauthorized' })).toEqual({ message: 'Unauthorized', type: 'Unauthorized' });
    expect(readApiError('nope')).toBeNull();
  });
});
