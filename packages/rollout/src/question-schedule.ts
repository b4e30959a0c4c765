import { AppError, ErrorCode, mixSeeds, mulberry32 } from '@sqlenv/shared';

/** The slice of a question the coordinator needs to admit a group. */
export interface ScheduledQuestion {
  questionId: string;
  dbId: string;
}

/**
 * Which question group `seq` plays, and with which seeds. Pure functions of
 * (run seed, seq): the distributed run, a restarted coordinator and the
 * synchronous reference loop all draw the same questions in the same order.
 *
 * Questions are dealt in epochs: each epoch is a fresh seeded permutation of
 * all questions, so N episodes may exceed the number of questions and every
 * question is used once per epoch.
 */
export class QuestionSchedule {
  readonly #questions: readonly ScheduledQuestion[];
  readonly #seed: number;
  readonly #epochs = new Map<number, readonly number[]>();

  constructor(questions: readonly ScheduledQuestion[], seed: number) {
    if (questions.length === 0) throw new AppError(ErrorCode.DATASET, 'no questions to schedule');
    // Sorted by id so the order never depends on how the dataset was loaded.
    this.#questions = [...questions].sort((a, b) => (a.questionId < b.questionId ? -1 : a.questionId > b.questionId ? 1 : 0));
    this.#seed = seed;
  }

  get size(): number {
    return this.#questions.length;
  }

  questionFor(seq: number): ScheduledQuestion {
    const n = this.#questions.length;
    const epoch = Math.floor(seq / n);
    const order = this.#epoch(epoch);
    return this.#questions[order[seq % n] as number] as ScheduledQuestion;
  }

  #epoch(epoch: number): readonly number[] {
    const cached = this.#epochs.get(epoch);
    if (cached) return cached;
    const rng = mulberry32(mixSeeds(this.#seed, epoch + 1));
    const order = this.#questions.map((_, i) => i);
    for (let i = order.length - 1; i > 0; i--) {
      const j = Math.floor(rng() * (i + 1));
      [order[i], order[j]] = [order[j] as number, order[i] as number];
    }
    // Only the latest epochs are ever asked for; keep the cache small.
    if (this.#epochs.size > 4) this.#epochs.clear();
    this.#epochs.set(epoch, order);
    return order;
  }
}

/** Seed of episode `index` of group `seq` (environment reset and policy share it). */
export function episodeSeed(runSeed: number, seq: number, index: number): number {
  return mixSeeds(mixSeeds(runSeed, seq), index) & 0x7fffffff;
}
