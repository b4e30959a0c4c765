import { z } from 'zod';

/** The four tools of SQLEnv (docs/architecture.md, "The environment"). */
export const ActionType = {
  DESCRIBE: 'DESCRIBE',
  SAMPLE: 'SAMPLE',
  QUERY: 'QUERY',
  ANSWER: 'ANSWER',
} as const;
export type ActionType = (typeof ActionType)[keyof typeof ActionType];
export const actionTypes = Object.values(ActionType) as [ActionType, ...ActionType[]];

/** Longest argument accepted (characters); longer input is a validation error, not a query. */
export const MAX_ARGUMENT_CHARS = 100_000;

/**
 * An agent's action. Strict: unknown fields are a validation error (OpenEnv
 * rejects unknown action fields too).
 */
export const SqlActionSchema = z
  .strictObject({
    action_type: z.enum(actionTypes).describe('DESCRIBE a table, SAMPLE its rows, QUERY with SQL, or ANSWER the question'),
    argument: z
      .string()
      .max(MAX_ARGUMENT_CHARS)
      .describe('Table name (DESCRIBE, SAMPLE), SQL text (QUERY), or the answer value (ANSWER)'),
  })
  .describe('SQLAction');
export type SqlAction = z.infer<typeof SqlActionSchema>;
