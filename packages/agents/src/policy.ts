import type { SqlAction, SqlObservation } from '@sqlenv/protocol';

/** What a policy is told when an episode starts. */
export interface EpisodeContext {
  episodeId: string;
  /** The question being played (privileged policies such as the oracle look up its gold SQL). */
  questionId: string;
  dbId: string;
  /** Seed for stochastic policies; the same seed gives the same episode. */
  seed: number;
}

/**
 * Per-episode state of a policy. LLM policies keep their token history here;
 * `act` is async because inference runs off the main thread.
 */
export interface PolicyEpisode {
  act(observation: SqlObservation): Promise<SqlAction>;
}

/** A policy: a factory of per-episode actors. Stateless between episodes. */
export interface Policy {
  readonly name: string;
  begin(context: EpisodeContext): PolicyEpisode;
}
