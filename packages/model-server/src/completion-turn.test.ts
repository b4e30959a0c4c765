import { describe, expect, it } from 'vitest';
import { ByteTokenizer, type TurnResult } from '@sqlenv/model';
import { CompletionRequestSchema, CompletionResponseSchema } from '@sqlenv/protocol';
import { checkSupported, completionResponse, type EngineLimits } from './completion-turn.ts';

const tokenizer = new ByteTokenizer();
const limits: EngineLimits = { maxModelLen: 32, vocabSize: 272, topK: 0, stopIds: [256, 258, 260], eosIds: [256, 258] };
const meta = { id: 'cmpl-x', createdS: 1, tokenizer, eosIds: limits.eosIds };
const req = (fields: Record<string, unknown> = {}) => CompletionRequestSchema.parse({ model: 'm', prompt: [104, 105], logprobs: 0, return_token_ids: true, ...fields });
const turn = (tokens: number[], finishReason: 'stop' | 'length'): TurnResult => ({
  tokens,
  logprobs: tokens.map(() => -1),
  sampleLogprobs: tokens.map(() => -0.5),
  finishReason,
  policyVersion: 0,
});

describe('completionResponse', () => {
  it('names a non-EOS stop token in stop_reason and leaves its text out', () => {
    const response = CompletionResponseSchema.parse(completionResponse(req(), turn([111, 107, 260], 'stop'), meta));
    const choice = response.choices[0]!;
    expect(choice).toMatchObject({ text: 'ok', token_ids: [111, 107, 260], prompt_token_ids: [104, 105], finish_reason: 'stop', stop_reason: 260 });
    expect(choice.logprobs?.token_logprobs).toEqual([-1, -1, -1]);
    expect(response.usage).toEqual({ prompt_tokens: 2, completion_tokens: 3, total_tokens: 5 });
  });

  it('has no stop_reason at EOS or at the length limit', () => {
    expect(completionResponse(req(), turn([111, 258], 'stop'), meta).choices[0]?.stop_reason).toBeNull();
    expect(completionResponse(req(), turn([111, 107], 'length'), meta).choices[0]).toMatchObject({ text: 'ok', finish_reason: 'length', stop_reason: null });
  });

  it('reports the truncated distribution’s log-probs under top-p, and nothing that was not asked for', () => {
    expect(completionResponse(req({ top_p: 0.9 }), turn([111], 'length'), meta).choices[0]?.logprobs?.token_logprobs).toEqual([-0.5]);
    const bare = completionResponse(req({ logprobs: null, return_token_ids: false }), turn([111], 'length'), meta).choices[0];
    expect(bare).toMatchObject({ logprobs: null, token_ids: null, prompt_token_ids: null });
  });
});

describe('checkSupported', () => {
  it('accepts the engine’s own settings, top_k 0 or -1 alike, and no extra stop ids', () => {
    expect(() => checkSupported(req({ stop_token_ids: [260] }), limits)).not.toThrow();
    expect(() => checkSupported(req({ stop_token_ids: [260, 256], top_k: 0 }), limits)).not.toThrow();
  });

  it('refuses stop ids that are not the engine’s and a prompt + max_tokens over the context', () => {
    expect(() => checkSupported(req(), limits)).toThrow(/stop_token_ids/);
    expect(() => checkSupported(req({ stop_token_ids: [260], max_tokens: 31 }), limits)).toThrow(/maximum context length is 32 tokens/);
  });
});
