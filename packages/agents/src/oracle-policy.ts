import { AppError, ErrorCode } from '@sqlenv/shared';
import type { QuestionRecord, SqlAction } from '@sqlenv/protocol';
import type { EpisodeContext, Policy, PolicyEpisode } from './policy.ts';

/** Looks questions up by id; a Dataset from @sqlenv/sql-env satisfies it. */
export interface QuestionLookup {
  question(id: string): QuestionRecord | undefined;
}

/**
 * The privileged upper-bound policy of the original SQLEnv: DESCRIBE each gold
 * table, QUERY the gold SQL, ANSWER the gold answer. Near-100 % success and
 * ≈1.2 reward per episode; its failures point at environment or verifier bugs.
 */
export class OraclePolicy implements Policy {
  readonly name = 'oracle';
  readonly #questions: QuestionLookup;

  constructor(questions: QuestionLookup) {
    this.#questions = questions;
  }

  begin(context: EpisodeContext): PolicyEpisode {
    const question = this.#questions.question(context.questionId);
    if (question === undefined) {
      throw new AppError(ErrorCode.NOT_FOUND, `oracle: unknown question ${context.questionId}`);
    }
    const plan: SqlAction[] = [
      ...question.tables_involved.map((table): SqlAction => ({ action_type: 'DESCRIBE', argument: table })),
      { action_type: 'QUERY', argument: question.gold_sql },
      { action_type: 'ANSWER', argument: question.gold_answer },
    ];
    let next = 0;
    return {
      act: () => {
        // Past the plan (the env kept the episode open), answering again is the only sensible move.
        const action = plan[Math.min(next, plan.length - 1)] as SqlAction;
        next += 1;
        return Promise.resolve(action);
      },
    };
  }
}
