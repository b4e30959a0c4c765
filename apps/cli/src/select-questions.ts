import type { SplitName } from '@sqlenv/protocol';
import type { Dataset } from '@sqlenv/sql-env';
import { drawQuestionIds } from '@sqlenv/agents';
import { UsageError } from './cli-error.ts';

/**
 * The question ids an evaluation plays: all of the split in dataset order, or
 * N drawn with a seeded shuffle (drawn again when N exceeds the split).
 * Where a dataset holds a single split, that split is the default.
 */
export function selectQuestionIds(
  dataset: Dataset,
  options: { split: SplitName | undefined; episodes: number | 'all'; seed: number },
): string[] {
  const split = options.split ?? dataset.defaultSplit;
  if (!dataset.splits.includes(split)) {
    throw new UsageError(`dataset ${dataset.name} has no split '${options.split ?? ''}' (it has: ${dataset.splits.join(', ')})`);
  }
  const ids = dataset.questionsOf(split).map((q) => q.question_id);
  if (ids.length === 0) throw new UsageError(`dataset ${dataset.name} has no playable questions in split ${split}`);
  return drawQuestionIds(ids, options.episodes, options.seed);
}
