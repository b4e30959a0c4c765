import { AppError, ErrorCode } from '@sqlenv/shared';
import type { TurnRequest, TurnResult } from './executor.ts';

/**
 * Lockstep rounds over lanes, the deterministic engine's barrier (engine option `deterministic`).
 * A lane is one evaluation lane: it plays episodes one after another and holds at most one turn at
 * a time. A round is released when every open lane has submitted its turn: a lane whose turn is
 * still running, or that is stepping its environment or resetting its next episode, is waited for.
 * The round's turns are handed on sorted by their order key (the episode index), so which turns
 * share a round, and in what order, depend only on the episodes played, never on timing: every
 * live episode has exactly one turn in each round, an episode that ended has none, and a lane that
 * starts its next episode stays open in between (counting lanes, not episodes, leaves no moment at
 * which an episode has ended and its successor is not yet counted).
 */

/** One lane's side of the rounds. */
export interface EngineLane {
  /**
   * This lane's next turn; `order` places it in its round (unique among the open lanes: the
   * episode's index). Resolves when the turn has finished; rejects a second turn while one is held.
   */
  generate(request: TurnRequest, order: number): Promise<TurnResult>;
  /** The lane plays no more episodes: rounds stop waiting for it. Idempotent. */
  close(): void;
}

/** A turn of a released round. */
export interface RoundTurn {
  order: number;
  request: TurnRequest;
}

/** Runs a released round: one promise per turn, in the round's order. */
export type RoundRunner = (round: number, turns: readonly RoundTurn[]) => Promise<TurnResult>[];

interface Pending extends RoundTurn {
  resolve: (result: TurnResult) => void;
  reject: (error: unknown) => void;
}

interface LaneState {
  /** Its turn waiting for the round to be released. */
  pending: Pending | undefined;
  /** Its turn is in a released round. */
  running: boolean;
}

export class TurnRounds {
  readonly #run: RoundRunner;
  readonly #open = new Set<LaneState>();
  #round = 0;

  constructor(run: RoundRunner) {
    this.#run = run;
  }

  /** Rounds released so far. */
  get rounds(): number {
    return this.#round;
  }

  /** Lanes open now. */
  get lanes(): number {
    return this.#open.size;
  }

  open(): EngineLane {
    const state: LaneState = { pending: undefined, running: false };
    this.#open.add(state);
    return {
      generate: (request, order) => {
        if (!this.#open.has(state)) return Promise.reject(new AppError(ErrorCode.ABORTED, 'the lane is closed'));
        if (!Number.isInteger(order)) return Promise.reject(new AppError(ErrorCode.VALIDATION, `a lane's order key must be an integer, got ${order}`));
        if (state.pending !== undefined || state.running) return Promise.reject(new AppError(ErrorCode.INTERNAL, 'a lane holds one turn at a time: its last turn has not finished'));
        return new Promise<TurnResult>((resolve, reject) => {
          state.pending = { order, request, resolve, reject };
          this.#release();
        });
      },
      close: () => {
        if (!this.#open.delete(state)) return;
        state.pending?.reject(new AppError(ErrorCode.ABORTED, 'the lane was closed with a turn waiting'));
        state.pending = undefined;
        this.#release();
      },
    };
  }

  /** Release the round once every open lane has a turn waiting. */
  #release(): void {
    const lanes = [...this.#open];
    if (lanes.length === 0 || lanes.some((l) => l.pending === undefined)) return;
    const turns = lanes.map((lane) => ({ lane, turn: lane.pending as Pending })).sort((a, b) => a.turn.order - b.turn.order);
    for (const lane of lanes) lane.pending = undefined;
    const twin = turns.find((t, i) => i > 0 && turns[i - 1]?.turn.order === t.turn.order);
    if (twin !== undefined) {
      const error = new AppError(ErrorCode.INTERNAL, `two lanes submitted turns with order key ${twin.turn.order}: a round's order keys are unique`);
      for (const { turn } of turns) turn.reject(error);
      return;
    }
    for (const lane of lanes) lane.running = true;
    const round = ++this.#round;
    const results = this.#run(round, turns.map(({ turn }) => ({ order: turn.order, request: turn.request })));
    turns.forEach(({ lane, turn }, i) => {
      const done = (): void => {
        lane.running = false;
      };
      (results[i] as Promise<TurnResult>).then(
        (result) => {
          done();
          turn.resolve(result);
        },
        (error: unknown) => {
          done();
          turn.reject(error);
        },
      );
    });
  }
}
