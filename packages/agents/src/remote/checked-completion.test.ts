import { describe, expect, it } from 'vitest';
import type { AppError} from '@sqlenv/shared';
import { ErrorCode } from '@sqlenv/shared';
import { InferenceServer } from './inference-pool.ts';
import { ServerUnreachableError } from './http-call.ts';
import { checkedCompletion } from './remote-completion-source.ts';
import type { CompletionRequest as CompletionRequestBody } from '@sqlenv/protocol';

/**
 * Answers a correct server never gives (the real server's answers are checked
 * end to end in tests/remote-inference.test.ts).
 */
const server = new InferenceServer('http://10.0.0.1:8000', 0);
const body = { model: 'base', prompt: [1, 2, 3], max_tokens: 4 } as CompletionRequestBody;

function answer(choice: Record<string, unknown>, status = 200): { status: number; text: string } {
  const base = { index: 0, text: 'ab', token_ids: [7, 8], prompt_token_ids: [1, 2, 3], logprobs: { token_logprobs: [-0.5, -0.25], tokens: ['a', 'b'], top_logprobs: null, text_offset: [0, 1] }, finish_reason: 'stop', stop_reason: null };
  return { status, text: JSON.stringify({ id: 'cmpl-1', object: 'text_completion', created: 1, model: 'base', choices: [{ ...base, ...choice }], usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } }) };
}

function failure(reply: { status: number; text: string }): AppError {
  try {
    checkedCompletion(reply, server, 'ep-t1-a0', body);
  } catch (error) {
    return error as AppError;
  }
  throw new Error('accepted');
}

describe('checkedCompletion', () => {
  it('returns the ids, log-probs and finish reason of a good answer', () => {
    expect(checkedCompletion(answer({}), server, 'r', body)).toEqual({ tokens: [7, 8], logprobs: [-0.5, -0.25], finishReason: 'stop' });
  });

  it.each([
    ['one log-prob short', { logprobs: { token_logprobs: [-0.5], tokens: ['a'], top_logprobs: null, text_offset: [0] } }, /not a completion: .*1 log-probs for 2 token ids/],
    ['another prompt echoed', { prompt_token_ids: [1, 2, 4] }, /prompt_token_ids \(3 ids\) differ from the 3 ids sent \(first at position 2: 4 vs 3\)/],
    ['a shorter prompt echoed', { prompt_token_ids: [1, 2] }, /differ from the 3 ids sent/],
    ['no token ids', { token_ids: null }, /no token_ids/],
    ['more ids than max_tokens', { token_ids: [1, 2, 3, 4, 5], logprobs: { token_logprobs: [-1, -1, -1, -1, -1], tokens: [], top_logprobs: null, text_offset: [] } }, /5 token ids for max_tokens 4/],
    ['an aborted finish', { finish_reason: 'abort' }, /not a completion: .*finish_reason/],
    ['no finish reason', { finish_reason: null }, /no finish_reason/],
    ['a positive log-prob', { logprobs: { token_logprobs: [0.5, -1], tokens: [], top_logprobs: null, text_offset: [] } }, /above 0/],
  ])('fails the turn on %s, naming server and request', (_label, choice, message) => {
    const error = failure(answer(choice));
    expect(error.code).toBe(ErrorCode.VALIDATION);
    expect(error.message).toMatch(message);
    expect(error.message).toContain('http://10.0.0.1:8000: completion ep-t1-a0 (model base)');
  });

  it('fails on a body that is not a completion', () => {
    expect(failure({ status: 200, text: '{"object":"list"}' }).message).toMatch(/not a completion/);
    expect(failure({ status: 200, text: '<html>' }).message).toMatch(/not JSON/);
  });

  it('makes a 5xx retryable and a 4xx final, with the server message', () => {
    expect(failure({ status: 502, text: 'bad gateway' })).toBeInstanceOf(ServerUnreachableError);
    const notFound = failure({ status: 404, text: JSON.stringify({ object: 'error', message: 'The model `x` does not exist.', type: 'NotFoundError', param: null, code: 404 }) });
    expect(notFound).not.toBeInstanceOf(ServerUnreachableError);
    expect(notFound.code).toBe(ErrorCode.NOT_FOUND);
    expect(notFound.message).toMatch(/HTTP 404: The model `x` does not exist\./);
  });
});
