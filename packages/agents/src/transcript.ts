import { z } from 'zod';
import { SqlActionSchema } from '@sqlenv/protocol';
import type { TurnEvent } from './run-episode.ts';

/**
 * One turn of an episode as a person reads it: what the model wrote, the action it parsed to (or
 * why it did not parse, or why the policy stopped), what the environment answered and the reward.
 * Built from runEpisode's TurnEvent, the one place that holds the model's text (trajectories keep
 * only token ids): `sqlenv eval --verbose` prints these and saved evaluations store them.
 */
export const TranscriptTurnSchema = z.strictObject({
  turn: z.number().int().nonnegative(),
  policy_version: z.number().int().nonnegative(),
  /** What the model wrote (null for text-only policies). */
  text: z.string().nullable(),
  /** The action sent (null when the turn held no valid tool call, or the policy stopped). */
  action: SqlActionSchema.nullable(),
  parse_error: z.string().nullable(),
  /** Why the policy ended the episode without acting (null otherwise). */
  stop: z.string().nullable(),
  /** The observation's result text ("" when the step failed or no step was taken). */
  result: z.string(),
  /** The observation's error text ("" when the action succeeded). */
  error: z.string(),
  /** Null when no step was taken (a stop). */
  reward: z.number().nullable(),
  done: z.boolean(),
});
export type TranscriptTurn = z.infer<typeof TranscriptTurnSchema>;

/** The readable form of a TurnEvent. */
export function transcriptTurn(event: TurnEvent): TranscriptTurn {
  const move = event.move;
  const stopped = 'stop' in move;
  return {
    turn: event.turn,
    policy_version: event.policyVersion,
    text: event.text,
    action: stopped || event.parseError !== null ? null : move,
    parse_error: event.parseError,
    stop: stopped ? `${move.stop} (${move.detail})` : null,
    result: event.observation?.result ?? '',
    error: event.observation?.error ?? '',
    reward: event.observation === undefined ? null : (event.reward ?? 0),
    done: event.done,
  };
}

/**
 * Collects the transcripts of an evaluate() run (pass `onTurn` to its options); `question(i)` is
 * the question text episode i was shown (from its observations).
 */
export class TranscriptCollector {
  readonly #turns = new Map<number, TranscriptTurn[]>();
  readonly #questions = new Map<number, string>();

  readonly onTurn = (index: number, event: TurnEvent): void => {
    let turns = this.#turns.get(index);
    if (turns === undefined) this.#turns.set(index, (turns = []));
    turns.push(transcriptTurn(event));
    if (event.observation !== undefined && !this.#questions.has(index)) this.#questions.set(index, event.observation.question);
  };

  /** Episode `index`'s turns in order ([] when it played none). */
  turns(index: number): TranscriptTurn[] {
    return [...(this.#turns.get(index) ?? [])].sort((a, b) => a.turn - b.turn);
  }

  question(index: number): string | undefined {
    return this.#questions.get(index);
  }
}
