import type { SqlAction, SqlObservation } from '@sqlenv/protocol';

/** What a policy is told when an episode starts. */
export interface EpisodeContext {
  episodeId: string;
  /** The question being played (privileged policies such as the oracle look up its gold SQL). */
  questionId: string;
  dbId: string;
  /** Seed for stochastic policies; the same seed gives the same episode. */
  seed: number;
  /**
   * The evaluation lane playing the episode (from the policy's `openLane`) and the episode's index,
   * its order key in a deterministic engine. Absent outside evaluations and for policies without lanes.
   */
  lockstep?: { lane: PolicyLane; order: number };
}

/**
 * One evaluation lane of a policy that batches across episodes: it plays episodes one after another
 * and is open from its first episode to its last, so a deterministic inference engine can wait for
 * every open lane's next turn before it runs on (docs/inference.md, "Exactness").
 */
export interface PolicyLane {
  /** The lane plays no more episodes. */
  close(): void;
  /** Deterministic engines: the lane plays only episodes whose index ≡ `index` mod `count` (its replica's share). */
  readonly pool?: { index: number; count: number };
}

/** Why a policy ends an episode it cannot continue (an LLM out of context). */
export type PolicyStopReason = 'context_exhausted';

/** A policy's answer to "the episode cannot go on": no action is sent to the environment. */
export interface PolicyStop {
  stop: PolicyStopReason;
  /** One line for logs and transcripts. */
  detail: string;
}

/** What a policy does at a turn: an action for the environment, or a stop. */
export type PolicyMove = SqlAction | PolicyStop;

export function isPolicyStop(move: PolicyMove): move is PolicyStop {
  return 'stop' in move;
}

/**
 * Per-episode state of a policy. LLM policies keep their token history here;
 * `act` is async because inference runs off the main thread.
 */
export interface PolicyEpisode {
  act(observation: SqlObservation): Promise<PolicyMove>;
  /** The episode is over (ended, stopped or failed): free what it holds. */
  close?(): void;
}

/** A policy: a factory of per-episode actors. Stateless between episodes. */
export interface Policy {
  readonly name: string;
  begin(context: EpisodeContext): PolicyEpisode;
  /** A lane for an evaluation's lane of episodes (passed back in each episode's context); policies that do not batch across episodes have none. */
  openLane?(): PolicyLane;
}

/**
 * The tokens of one turn, as an LLM policy recorded them (token-in/token-out:
 * nothing is re-tokenised later). Text-only policies record none.
 */
export interface TurnTokens {
  /** Ids appended to the context before sampling: the whole prompt on turn 0, then the observation and template glue. */
  prompt_ids: number[];
  /** Ids the model sampled, up to and including the stop token. */
  completion_ids: number[];
  /** 0 for every prompt id, 1 for every completion id. */
  loss_mask: Array<0 | 1>;
  /** Full-softmax log-prob at the sampling temperature of each completion id. */
  logprobs: number[];
  /** Why the completion held no valid tool call (null when it did). */
  parse_error: string | null;
  /** The adapter version the completion was actually sampled with (from the inference thread). */
  policy_version: number;
  /** The completion decoded (transcripts; not stored in trajectories). */
  text: string;
}

/**
 * A PolicyEpisode that records tokens: after each `act`, `takeTurnTokens()`
 * returns that turn's tokens (once). The episode runner uses it when present.
 */
export interface TokenRecordingEpisode extends PolicyEpisode {
  takeTurnTokens(): TurnTokens | null;
}

export function recordsTokens(episode: PolicyEpisode): episode is TokenRecordingEpisode {
  return typeof (episode as Partial<TokenRecordingEpisode>).takeTurnTokens === 'function';
}
