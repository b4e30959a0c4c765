import { z } from 'zod';

/** The four tools of SQLEnv (docs/architecture.md, "The environment"). */
export const ActionType = {
  DESCRIBE: 'DESCRIBE',
  SAMPLE: 'SAMPLE',
  QUERY: 'QUERY',
  ANSWER: 'ANSWER',
} as const;
export type ActionType = (typeof ActionType)[keyof typeof ActionType];
/** The four tools (what an agent is offered; `PARSE_ERROR` is not a tool). */
export const actionTypes = Object.values(ActionType) as [ActionType, ...ActionType[]];

/**
 * Not a tool: what an agent harness sends when the model's output held no
 * valid tool call. The argument says what was wrong; the environment shows it
 * as the observation's `error`, charges `RewardConfig.formatPenalty` and one
 * step of the budget. Sent like any action, it works the same in process and
 * over the wire (OpenEnv server + client).
 */
export const PARSE_ERROR_ACTION = 'PARSE_ERROR';
export type ParseErrorAction = typeof PARSE_ERROR_ACTION;
/** Every accepted `action_type`: the four tools and PARSE_ERROR. */
export const stepActionTypes = [...actionTypes, PARSE_ERROR_ACTION] as [ActionType | ParseErrorAction, ...(ActionType | ParseErrorAction)[]];

/**
 * Longest argument the environment acts on (characters). A longer one is the
 * agent's mistake, not a malformed request: the step is answered with an error
 * observation and charged as a format error, nothing is run or verified. The
 * schema itself sets no length limit (the transport bounds what can arrive:
 * the server's maxBodyBytes / maxFrameBytes), so an oversized argument never
 * throws and a trajectory that recorded one still validates.
 */
export const MAX_ARGUMENT_CHARS = 100_000;

/**
 * An agent's action. Strict: unknown fields are a validation error (OpenEnv
 * rejects unknown action fields too).
 */
export const SqlActionSchema = z
  .strictObject({
    action_type: z
      .enum(stepActionTypes)
      .describe('DESCRIBE a table, SAMPLE its rows, QUERY with SQL, or ANSWER the question (PARSE_ERROR: the agent produced no valid action; argument = what was wrong)'),
    argument: z
      .string()
      .describe('Table name (DESCRIBE, SAMPLE), SQL text (QUERY), the answer value (ANSWER), or the parse error (PARSE_ERROR)'),
  })
  .describe('SQLAction');
export type SqlAction = z.infer<typeof SqlActionSchema>;
