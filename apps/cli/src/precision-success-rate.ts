import type { EpisodeRecord } from '@sqlenv/agents';
import { FloatMatch, verifyAnswer, type Dataset } from '@sqlenv/sql-env';

/**
 * Did an episode end with an answer that is also right when floats are judged
 * precision-aware (FloatMatch.PRECISION: rounded at the gold's shown decimals,
 * or within 1e-6 relative)? The final ANSWER is checked again against the
 * question in the local copy of the dataset; an episode that did not answer,
 * or whose question is not in that copy, counts as a failure.
 */
export function precisionAwareSuccess(record: EpisodeRecord, dataset: Pick<Dataset, 'question'>): boolean {
  if (record.done_reason !== 'answered' || record.question_id === null) return false;
  const answer = record.actions.at(-1);
  if (answer?.action_type !== 'ANSWER') return false;
  const question = dataset.question(record.question_id);
  return question !== undefined && verifyAnswer(answer.argument, question, FloatMatch.PRECISION).correct;
}

/**
 * The success rate of the same episodes under precision-aware float matching,
 * next to the environment's own verdict (its configured floatMatch, 1 %
 * relative by default): the two differ by the answers that were only close.
 */
export function precisionSuccessRate(records: readonly EpisodeRecord[], dataset: Pick<Dataset, 'question'>): number {
  if (records.length === 0) return 0;
  return records.filter((record) => precisionAwareSuccess(record, dataset)).length / records.length;
}
