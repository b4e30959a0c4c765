import type { EvaluationEnvironment } from '@sqlenv/agents';
import type { EpisodeState, ResetOptions, SqlAction, SqlObservation, StepInfo, StepResult } from '@sqlenv/protocol';

/**
 * A tiny deterministic environment for the report tests: question `toy_q<n>` asks "what is n × 7?",
 * one table to DESCRIBE, then ANSWER (no SQLite: the tests exercise saved evaluations, not SQL).
 */
const BUDGET = 4;

function breakdown(total: number, terminal: number): StepInfo['reward_breakdown'] {
  return { operational: total - terminal, progress: 0, potential: 0, terminal, dense_unclipped: total - terminal, dense: total - terminal, total };
}

class AnsweringEnvironment implements EvaluationEnvironment {
  #questionId = '';
  #steps = 0;

  #observation(result: string): SqlObservation {
    return { question: `What is ${this.#questionId.replace('toy_q', '')} times 7?`, schema_info: 'numbers', result, error: '', step_count: this.#steps, budget_remaining: BUDGET - this.#steps, action_history: [] };
  }

  reset(options: ResetOptions = {}): Promise<StepResult> {
    this.#questionId = options.question_id ?? 'toy_q0';
    this.#steps = 0;
    return Promise.resolve({ observation: this.#observation(''), reward: null, done: false });
  }

  step(action: SqlAction): Promise<StepResult & { info: StepInfo }> {
    this.#steps += 1;
    if (action.action_type === 'ANSWER') {
      const correct = action.argument === String(Number(this.#questionId.replace('toy_q', '')) * 7);
      const reward = correct ? 1 : 0;
      return Promise.resolve({ observation: this.#observation(correct ? 'correct' : 'wrong'), reward, done: true, info: { reward_breakdown: breakdown(reward, reward), executed: true, correct, done_reason: 'answered' } });
    }
    const done = this.#steps >= BUDGET;
    return Promise.resolve({
      observation: this.#observation('n INTEGER'),
      reward: 0.01,
      done,
      info: { reward_breakdown: breakdown(0.01, 0), executed: true, ...(done ? { correct: false, done_reason: 'budget_exhausted' as const } : {}) },
    });
  }

  state(): EpisodeState {
    return { episode_id: 'e', question_id: null, db_id: null, step_count: 0, budget_remaining: BUDGET, done: false, total_reward: 0 };
  }

  close(): void {}
}

export function answeringEnvironment(): EvaluationEnvironment {
  return new AnsweringEnvironment();
}
