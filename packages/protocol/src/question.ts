import { z } from 'zod';

export const AnswerType = {
  INTEGER: 'integer',
  FLOAT: 'float',
  STRING: 'string',
  LIST: 'list',
  TABLE: 'table',
} as const;
export type AnswerType = (typeof AnswerType)[keyof typeof AnswerType];
export const answerTypes = Object.values(AnswerType) as [AnswerType, ...AnswerType[]];

export const Difficulty = { EASY: 'easy', MEDIUM: 'medium', HARD: 'hard' } as const;
export type Difficulty = (typeof Difficulty)[keyof typeof Difficulty];
export const difficulties = Object.values(Difficulty) as [Difficulty, ...Difficulty[]];

export const SplitName = z.enum(['train', 'dev']);
export type SplitName = z.infer<typeof SplitName>;

/** One SQLite value as returned to JavaScript (BLOBs are rendered as hex strings). */
export const CellSchema = z.union([z.string(), z.number(), z.null()]);
export type Cell = z.infer<typeof CellSchema>;

/**
 * A question with its precomputed gold answer (docs/architecture.md, "The environment",
 * "Dataset record"). `gold_answer` is the canonical text an oracle would
 * answer with; `gold_rows` are the gold query's rows (for progress reward).
 */
export const QuestionRecordSchema = z.strictObject({
  question_id: z.string().min(1),
  question_text: z.string().min(1),
  database_name: z.string().min(1),
  gold_sql: z.string().min(1),
  gold_answer: z.string(),
  gold_columns: z.array(z.string()),
  gold_rows: z.array(z.array(CellSchema)),
  answer_type: z.enum(answerTypes),
  difficulty: z.enum(difficulties),
  tables_involved: z.array(z.string()),
  split: SplitName,
});
export type QuestionRecord = z.infer<typeof QuestionRecordSchema>;
