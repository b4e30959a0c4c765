import { randomInt } from 'node:crypto';
import type { TextTokenizer, TurnRequest, TurnResult } from '@sqlenv/model';
import { TOP_K_OFF, type CompletionChoice, type CompletionRequest, type CompletionResponse } from '@sqlenv/protocol';
import { refuse } from './api-errors.ts';

/** What the engine was started with: the sampling settings a request must match. */
export interface EngineLimits {
  /** Tokens of prompt + completion. */
  maxModelLen: number;
  vocabSize: number;
  /** The engine's top-k (0 = off). */
  topK: number;
  /** Ids the engine stops at. */
  stopIds: readonly number[];
  /** The checkpoint's end-of-sequence ids: vLLM stops at them besides `stop_token_ids`. */
  eosIds: readonly number[];
}

/**
 * Refuse, naming the field, what the engine cannot sample as asked: the engine draws one completion
 * per request with its own top-k and stop ids, no min-p or repetition penalty, and reports only the
 * sampled tokens' log-probs.
 */
export function checkSupported(req: CompletionRequest, limits: EngineLimits): void {
  if (req.n !== 1) throw refuse('n', `n must be 1 (one completion per request), got ${req.n}`);
  if (req.stream) throw refuse('stream', 'streaming is not supported: send stream false');
  if (req.min_p !== 0) throw refuse('min_p', `min_p must be 0 (the engine has no min-p), got ${req.min_p}`);
  if (req.repetition_penalty !== 1) throw refuse('repetition_penalty', `repetition_penalty must be 1, got ${req.repetition_penalty}`);
  if (req.logprobs !== null && req.logprobs !== 0) throw refuse('logprobs', `logprobs must be 0 or null (only the sampled token's log-prob is reported), got ${req.logprobs}`);
  const topK = req.top_k === TOP_K_OFF ? 0 : req.top_k;
  if (topK !== limits.topK) throw refuse('top_k', `top_k must be ${limits.topK === 0 ? '-1 (off)' : limits.topK}, this server's top-k, got ${req.top_k}`);
  checkStopIds(req.stop_token_ids, limits);
  checkLength(req, limits);
}

/** vLLM stops at the model's EOS ids and `stop_token_ids`; that set must be the engine's. */
function checkStopIds(requested: readonly number[], limits: EngineLimits): void {
  const asked = new Set([...requested, ...limits.eosIds]);
  const engine = new Set(limits.stopIds);
  const same = asked.size === engine.size && [...asked].every((id) => engine.has(id));
  if (!same) {
    throw refuse('stop_token_ids', `stop_token_ids with the model's EOS ids must be this server's stop ids [${[...engine].join(', ')}], got [${requested.join(', ')}]`);
  }
}

function checkLength(req: CompletionRequest, limits: EngineLimits): void {
  const badId = req.prompt.findIndex((id) => id >= limits.vocabSize);
  if (badId >= 0) throw refuse('prompt', `prompt[${badId}] = ${req.prompt[badId]} is not a token id of this model (vocabulary of ${limits.vocabSize})`);
  const total = req.prompt.length + req.max_tokens;
  if (total > limits.maxModelLen) {
    throw refuse(
      'max_tokens',
      `This model's maximum context length is ${limits.maxModelLen} tokens. However, you requested ${total} tokens (${req.prompt.length} in the prompt, ${req.max_tokens} in the completion). Please reduce the length of the prompt or max_tokens.`,
    );
  }
}

/** The engine turn of a request (a random seed when none was given, as vLLM draws one). */
export function turnOf(req: CompletionRequest, cacheKey: string): TurnRequest {
  return {
    promptIds: req.prompt,
    maxNewTokens: req.max_tokens,
    seed: req.seed ?? randomInt(2 ** 31),
    temperature: req.temperature,
    topP: req.top_p,
    cacheKey,
  };
}

/**
 * vLLM's completion response for one engine turn. Log-probs are vLLM's processed ones: log softmax
 * of logits / temperature over the full vocabulary when nothing truncates the distribution, the
 * truncated (top-p / top-k) distribution's otherwise.
 */
export function completionResponse(req: CompletionRequest, result: TurnResult, meta: { id: string; createdS: number; tokenizer: TextTokenizer | null; eosIds: readonly number[] }): CompletionResponse {
  const tokens = result.tokens;
  const last = tokens.at(-1);
  const stopped = result.finishReason === 'stop' && last !== undefined;
  // The stop token's text is left out of `text`, as vLLM does without include_stop_str_in_output.
  const textIds = stopped ? tokens.slice(0, -1) : tokens;
  const truncated = req.top_p < 1 || req.top_k > 0;
  const choice: CompletionChoice = {
    index: 0,
    text: meta.tokenizer === null ? '' : meta.tokenizer.decode(textIds, { skipSpecialTokens: req.skip_special_tokens }),
    token_ids: req.return_token_ids ? tokens : null,
    prompt_token_ids: req.return_token_ids ? req.prompt : null,
    logprobs: req.logprobs === null ? null : tokenLogprobs(tokens, truncated ? result.sampleLogprobs : result.logprobs, meta.tokenizer),
    finish_reason: result.finishReason,
    stop_reason: stopped && !meta.eosIds.includes(last) ? last : null,
  };
  return {
    id: meta.id,
    object: 'text_completion',
    created: meta.createdS,
    model: req.model,
    choices: [choice],
    usage: { prompt_tokens: req.prompt.length, completion_tokens: tokens.length, total_tokens: req.prompt.length + tokens.length },
  };
}

function tokenLogprobs(ids: readonly number[], logprobs: readonly number[], tokenizer: TextTokenizer | null): NonNullable<CompletionChoice['logprobs']> {
  // vLLM's `return_tokens_as_token_ids` spelling when there is no tokenizer to name a token.
  const tokens = ids.map((id) => (tokenizer === null ? `token_id:${id}` : tokenizer.decode([id], { skipSpecialTokens: false })));
  const textOffset: number[] = [];
  let offset = 0;
  for (const token of tokens) {
    textOffset.push(offset);
    offset += token.length;
  }
  // JSON has no -Infinity; vLLM clamps such log-probs the same way.
  return { token_logprobs: logprobs.map((lp) => Math.max(lp, -9999)), tokens, top_logprobs: null, text_offset: textOffset };
}
