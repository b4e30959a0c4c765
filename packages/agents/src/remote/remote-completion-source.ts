import { CompletionResponseSchema, TOP_K_OFF, type CompletionRequest as CompletionRequestBody } from '@sqlenv/protocol';
import { AppError, ErrorCode, formatZodIssues } from '@sqlenv/shared';
import type { Completion, CompletionRequest, CompletionSource, EpisodeCompleter, SamplingOptions } from '../completion-source.ts';
import type { EpisodeContext } from '../policy.ts';
import { serverError, type AdapterManager } from './adapter-manager.ts';
import type { HttpReply } from './http-call.ts';
import { StickyServer, type InferencePool, type InferenceServer } from './inference-pool.ts';

export interface RemoteCompletionSourceOptions {
  pool: InferencePool;
  adapters: AdapterManager;
  sampling: SamplingOptions;
  /** The model's stop ids (chat template end of turn + EOS). */
  stopIds: readonly number[];
}

/**
 * Completions from vLLM-compatible servers (`POST /v1/completions`): the
 * episode's whole context as token ids each turn, every sampling field sent
 * (a server would otherwise take its generation_config defaults), the sampled
 * ids and their log-probs checked before the agent sees them. An episode's
 * turns stick to one server; `close()` frees its place there.
 */
export class RemoteCompletionSource implements CompletionSource {
  readonly #options: RemoteCompletionSourceOptions;
  #version = 0;
  /** The version whose adapter samples: a version with no adapter of its own (a statistics-only update) keeps the last one. */
  #adapterVersion = 0;

  constructor(options: RemoteCompletionSourceOptions) {
    this.#options = options;
  }

  get version(): number {
    return this.#version;
  }

  /** Sample the next turns with `version` (`hasAdapter` false: it moves the version, the adapter stays). */
  setVersion(version: number, hasAdapter: boolean): void {
    this.#version = version;
    if (hasAdapter) this.#adapterVersion = version;
  }

  episode(context: EpisodeContext): EpisodeCompleter {
    const sticky = new StickyServer(this.#options.pool);
    return {
      complete: (request) => this.#complete(sticky, context, request),
      close: () => sticky.close(),
    };
  }

  async #complete(sticky: StickyServer, context: EpisodeContext, request: CompletionRequest): Promise<Completion> {
    const version = this.#version;
    const adapterVersion = this.#adapterVersion;
    const requestId = `${context.episodeId}-t${request.turn}`;
    return sticky.run(`turn ${request.turn} of episode ${context.episodeId}`, async (server, attempt) => {
      const { adapters } = this.#options;
      const model = await adapters.use(server, adapterVersion);
      try {
        const body = this.#body(request, model, version);
        const id = `${requestId}-a${attempt}`;
        let reply = await this.#options.pool.call(server, 'POST', '/v1/completions', body, id);
        if (isUnknownModel(reply) && !adapters.isBase(adapterVersion)) {
          // The server forgot the adapter (it restarted): load it again and retry once.
          await adapters.reprime(server, adapterVersion);
          reply = await this.#options.pool.call(server, 'POST', '/v1/completions', body, `${id}-reprimed`);
        }
        return { ...checkedCompletion(reply, server, id, body), policyVersion: version };
      } finally {
        adapters.done(server, adapterVersion);
      }
    });
  }

  #body(request: CompletionRequest, model: string, version: number): CompletionRequestBody {
    const { sampling, stopIds } = this.#options;
    return {
      model,
      prompt: [...request.promptIds],
      max_tokens: request.maxNewTokens,
      temperature: sampling.temperature,
      top_p: sampling.topP,
      top_k: sampling.topK > 0 ? sampling.topK : TOP_K_OFF,
      min_p: 0,
      repetition_penalty: 1,
      n: 1,
      seed: request.seed,
      logprobs: 0,
      return_token_ids: true,
      stop_token_ids: [...stopIds],
      skip_special_tokens: false,
      cache_salt: String(version),
      stream: false,
    };
  }
}

function isUnknownModel(reply: HttpReply): boolean {
  return reply.status === 404 && /does not exist/i.test(reply.text);
}

/**
 * The sampled ids and log-probs of a 200 answer, after checking it says what
 * was asked: the prompt echoed as sent, one log-prob per id, no more ids than
 * allowed, a known finish reason. Anything else fails the turn: a trajectory
 * the trainer would misread is worse than a retried episode.
 */
export function checkedCompletion(reply: HttpReply, server: InferenceServer, requestId: string, body: CompletionRequestBody): Omit<Completion, 'policyVersion'> {
  if (reply.status !== 200) throw serverError(server, `completion ${requestId} (model ${body.model})`, reply);
  const fail = (what: string): never => {
    throw new AppError(ErrorCode.VALIDATION, `${server.url}: completion ${requestId} (model ${body.model}): ${what}`, { details: { server: server.url, requestId } });
  };
  let json: unknown;
  try {
    json = JSON.parse(reply.text);
  } catch {
    return fail('the answer is not JSON');
  }
  const parsed = CompletionResponseSchema.safeParse(json);
  if (!parsed.success) return fail(`the answer is not a completion: ${formatZodIssues(parsed.error)}`);
  const choice = parsed.data.choices[0];
  if (choice === undefined || parsed.data.choices.length !== 1) return fail(`${parsed.data.choices.length} choices for n=1`);
  const tokens = choice.token_ids ?? fail('no token_ids (the server must honour return_token_ids)');
  const echoed = choice.prompt_token_ids ?? fail('no prompt_token_ids (the server must honour return_token_ids)');
  if (!sameIds(echoed, body.prompt)) return fail(`prompt_token_ids (${echoed.length} ids) differ from the ${body.prompt.length} ids sent${firstDifference(echoed, body.prompt)}`);
  const logprobs = choice.logprobs?.token_logprobs ?? fail('no logprobs (the server must honour logprobs: 0)');
  if (logprobs.length !== tokens.length) return fail(`${logprobs.length} log-probs for ${tokens.length} token ids`);
  if (tokens.length > body.max_tokens) return fail(`${tokens.length} token ids for max_tokens ${body.max_tokens}`);
  if (logprobs.some((lp) => lp > 1e-6)) return fail('a log-prob above 0');
  const finishReason = choice.finish_reason ?? fail('no finish_reason');
  return { tokens, logprobs, finishReason };
}

function sameIds(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((id, i) => id === b[i]);
}

function firstDifference(a: readonly number[], b: readonly number[]): string {
  const i = a.findIndex((id, k) => id !== b[k]);
  return i < 0 ? '' : ` (first at position ${i}: ${a[i]} vs ${b[i] ?? 'nothing'})`;
}
