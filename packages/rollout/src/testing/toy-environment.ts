import type { Policy, PolicyEpisode } from '@sqlenv/agents';
import type { ResetOptions, SqlAction, SqlObservation, StepInfo, StepResult } from '@sqlenv/protocol';
import { AppError, ErrorCode } from '@sqlenv/shared';
import type { EnvironmentSource, RolloutEnvironment } from '../play-episode.ts';
import type { ScheduledQuestion } from '../question-schedule.ts';

/**
 * A tiny deterministic environment for the transport contract tests: "what is
 * n × 7?", one table to DESCRIBE, then ANSWER. Fast (no SQLite), so the tests
 * exercise queues, retries and the trainer, not SQL. Questions listed in
 * `poisoned` throw on reset, like an environment whose database is broken.
 */
export const TOY_QUESTIONS: readonly ScheduledQuestion[] = Array.from({ length: 7 }, (_, i) => ({ questionId: `toy_q${i}`, dbId: 'toy' }));

const BUDGET = 4;

function answerOf(questionId: string): string {
  return String(Number(questionId.replace('toy_q', '')) * 7);
}

function breakdown(total: number, terminal: number): StepInfo['reward_breakdown'] {
  return { operational: total - terminal, progress: 0, potential: 0, terminal, dense_unclipped: total - terminal, dense: total - terminal, total };
}

class ToyEnvironment implements RolloutEnvironment {
  #questionId = '';
  #steps = 0;
  readonly #poisoned: ReadonlySet<string>;

  constructor(poisoned: ReadonlySet<string>) {
    this.#poisoned = poisoned;
  }

  #observation(result: string, error = ''): SqlObservation {
    return { question: `What is ${this.#questionId.replace('toy_q', '')} times 7?`, schema_info: 'numbers', result, error, step_count: this.#steps, budget_remaining: BUDGET - this.#steps, action_history: [] };
  }

  async reset(options: ResetOptions): Promise<StepResult> {
    await new Promise((resolve) => setImmediate(resolve));
    const id = options.question_id ?? 'toy_q0';
    if (this.#poisoned.has(id)) throw new AppError(ErrorCode.EXECUTOR_CRASHED, `poisoned question ${id}`);
    this.#questionId = id;
    this.#steps = 0;
    return { observation: this.#observation(''), reward: null, done: false };
  }

  async step(action: SqlAction): Promise<StepResult & { info: StepInfo }> {
    await new Promise((resolve) => setImmediate(resolve));
    this.#steps += 1;
    if (action.action_type === 'ANSWER') {
      const correct = action.argument === answerOf(this.#questionId);
      const reward = correct ? 1 : 0;
      return { observation: this.#observation(correct ? 'correct' : 'wrong'), reward, done: true, info: { reward_breakdown: breakdown(reward, reward), executed: true, correct, done_reason: 'answered' } };
    }
    const done = this.#steps >= BUDGET;
    return {
      observation: this.#observation('n INTEGER'),
      reward: 0.01,
      done,
      info: { reward_breakdown: breakdown(0.01, 0), executed: true, ...(done ? { correct: false, done_reason: 'budget_exhausted' as const } : {}) },
    };
  }

  close(): void {}
}

export function toyEnvironments(poisoned: readonly string[] = []): EnvironmentSource {
  const set = new Set(poisoned);
  return { create: () => new ToyEnvironment(set) };
}

/** DESCRIBE once, then answer — right when the seed is odd, so groups have reward variance (and some none). */
export class ToyPolicy implements Policy {
  readonly name = 'toy';

  begin(context: { questionId: string; seed: number }): PolicyEpisode {
    let turn = 0;
    return {
      act: (_observation: SqlObservation): Promise<SqlAction> => {
        turn += 1;
        if (turn === 1) return Promise.resolve({ action_type: 'DESCRIBE', argument: 'numbers' });
        return Promise.resolve({ action_type: 'ANSWER', argument: context.seed % 2 === 0 ? '-1' : answerOf(context.questionId) });
      },
    };
  }
}
