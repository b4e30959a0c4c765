import type { SqlObservation } from '@sqlenv/protocol';
import type { EngineLane, InferenceEngine } from '@sqlenv/model';
import type { EpisodeContext, PolicyLane } from './policy.ts';

/**
 * Where an LLM agent's completions come from. The model (an InferenceEngine
 * shared by every episode of a process) is one source; a script (tests) and
 * the oracle rendered as tool calls (SFT data) are others. All go through the
 * same agent code: prompt building, budgets, parsing, token recording.
 */
export interface CompletionRequest {
  /** The whole context so far, ending in the generation prompt. */
  promptIds: readonly number[];
  /** Most new tokens for this turn (the per-turn limit, or less near the context limit). */
  maxNewTokens: number;
  /** Seeds this turn's sampling (derived from the episode seed and the turn). */
  seed: number;
  turn: number;
  /** The observation the turn answers (scripted sources read it; the model reads only ids). */
  observation: SqlObservation;
}

export interface Completion {
  /** Sampled ids, up to and including the stop token. */
  tokens: number[];
  /** Full-softmax log-prob at the sampling temperature of each id. */
  logprobs: number[];
  finishReason: 'stop' | 'length';
  /** The adapter version that produced it. */
  policyVersion: number;
}

/** One episode's completer. */
export interface EpisodeCompleter {
  complete(request: CompletionRequest): Promise<Completion>;
  /** The episode is over: free what it holds (a remote server's place). */
  close?(): void;
}

export interface CompletionSource {
  /** Called once per episode. */
  episode(context: EpisodeContext): EpisodeCompleter;
  /** A lane of episodes (Policy `openLane`); sources that do not batch across episodes have none. */
  openLane?(): PolicyLane;
}

/** Sampling settings of a model source (what the trajectory records). */
export interface SamplingOptions {
  /** 0 = greedy. */
  temperature: number;
  topP: number;
  /** Applied by the engine (one value per engine, set at its start). */
  topK: number;
}

/**
 * The model: every episode's turns go to one InferenceEngine, which batches
 * the turns of all episodes on its worker thread and keeps each episode's KV
 * cache between its turns (keyed by the episode id).
 */
export class EngineCompletionSource implements CompletionSource {
  readonly #engine: InferenceEngine;
  readonly #sampling: SamplingOptions;
  /** The lanes this source opened (an episode's context may carry another source's). */
  readonly #lanes = new WeakMap<PolicyLane, EngineLane>();

  constructor(engine: InferenceEngine, sampling: SamplingOptions) {
    this.#engine = engine;
    this.#sampling = sampling;
  }

  /** An engine lane: on a deterministic engine the lanes' turns run in lockstep. */
  openLane(): PolicyLane {
    const lane = this.#engine.openLane();
    const handle: PolicyLane = { close: () => lane.close(), ...(lane.pool === undefined ? {} : { pool: lane.pool }) };
    this.#lanes.set(handle, lane);
    return handle;
  }

  episode(context: EpisodeContext): EpisodeCompleter {
    const lane = context.lockstep === undefined ? undefined : this.#lanes.get(context.lockstep.lane);
    const order = context.lockstep?.order ?? 0;
    return {
      complete: async (request) => {
        const turn = {
          promptIds: request.promptIds,
          maxNewTokens: request.maxNewTokens,
          seed: request.seed,
          // Each turn's prompt extends the last one's context: the engine keeps the episode's KV cache in between.
          cacheKey: context.episodeId,
          temperature: this.#sampling.temperature,
          topP: this.#sampling.topP,
        };
        const result = await (lane === undefined ? this.#engine.generate(turn) : lane.generate(turn, order));
        return { tokens: result.tokens, logprobs: result.logprobs, finishReason: result.finishReason, policyVersion: result.policyVersion };
      },
    };
  }
}

/**
 * A script: each turn's completion ids come from a function of the request
 * (tests play whole episodes without depending on what a random model
 * writes). Log-probs are 0, the version is the one given.
 */
export class ScriptedCompletionSource implements CompletionSource {
  readonly #script: (request: CompletionRequest, context: EpisodeContext) => number[] | Promise<number[]>;
  readonly #stopIds: ReadonlySet<number>;
  readonly #policyVersion: number;

  constructor(script: (request: CompletionRequest, context: EpisodeContext) => number[] | Promise<number[]>, options: { stopIds: readonly number[]; policyVersion?: number }) {
    this.#script = script;
    this.#stopIds = new Set(options.stopIds);
    this.#policyVersion = options.policyVersion ?? 0;
  }

  episode(context: EpisodeContext): EpisodeCompleter {
    return {
      complete: async (request) => {
        const all = await this.#script(request, context);
        const stop = all.findIndex((id) => this.#stopIds.has(id));
        const tokens = stop >= 0 ? all.slice(0, stop + 1) : all;
        const cut = tokens.slice(0, request.maxNewTokens);
        return {
          tokens: cut,
          logprobs: cut.map(() => 0),
          finishReason: stop >= 0 && stop < request.maxNewTokens ? 'stop' : 'length',
          policyVersion: this.#policyVersion,
        };
      },
    };
  }
}
