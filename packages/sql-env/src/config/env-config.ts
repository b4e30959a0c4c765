import { z } from 'zod';
import { AppError, ErrorCode, formatZodIssues } from '@sqlenv/shared';
import { RewardConfigSchema } from '../reward/index.ts';
import { FloatMatch, floatMatches } from '../verifier/match-cell.ts';

/**
 * Every limit of an episode, in one place (docs/architecture.md, "The environment" gives
 * the original's values). Defaults live here only.
 */
export const EnvConfigSchema = z.strictObject({
  /** Steps per episode, ANSWER included; at 0 the episode ends with terminal reward 0 (the original: 15). */
  stepBudget: z.number().int().positive().max(1_000).default(15),
  /** Rows of a QUERY result shown to the agent; the total is given in a note. */
  resultMaxRows: z.number().int().positive().default(20),
  /** Characters of any result text shown to the agent (the original cut at 2,000). */
  resultMaxChars: z.number().int().min(200).default(2_000),
  /** Rows shown by SAMPLE (`SELECT * FROM t LIMIT n`). */
  sampleRows: z.number().int().positive().default(5),
  /** Time limit of one DESCRIBE/SAMPLE/QUERY statement, in milliseconds. */
  queryTimeoutMs: z.number().int().positive().default(5_000),
  /**
   * Rows fetched from a QUERY at most: enough to count the result for the agent
   * and to score progress against the gold rows, bounded so one `SELECT *` of a
   * large table cannot flood the pipe.
   */
  queryMaxRows: z.number().int().positive().default(1_000),
  /**
   * `accept`: a QUERY that fails only because it writes strings in double
   * quotes (`WHERE name = "Bob"`, legal in stock SQLite and all over Spider)
   * is run again with them as '...' literals, as the original environment's
   * SQLite did. `reject`: the agent gets SQLite's error.
   */
  doubleQuotedStrings: z.enum(['accept', 'reject']).default('accept'),
  /**
   * How a float ANSWER is compared with the gold value. `relative`: within 1 %
   * (the original's verifier, kept for parity: it accepts 203.6 for 203.5).
   * `precision`: the answer must round to the gold at the decimals the gold
   * shows, or lie within 1e-6 relative of it (verifier README, "Comparison rules").
   */
  floatMatch: z.enum(floatMatches).default(FloatMatch.RELATIVE),
  /** Characters of an argument quoted in `action_history`. */
  historyArgumentChars: z.number().int().min(10).default(80),
  /** Reward shaping (three layers of the original). */
  reward: RewardConfigSchema.prefault({}),
  /**
   * What `step()` returns as `reward` (and `state()` sums as `total_reward`).
   * `train`: the shaped reward (dense L1 + L2 plus terminal L3), what RL needs.
   * `eval`: the terminal reward only, 0 on every other step — the progress term
   * scores a QUERY against the gold rows, so a client that sees it can test
   * candidate answers before answering. The full breakdown is still computed
   * and returned in `info.reward_breakdown` (in process only) either way.
   */
  rewardMode: z.enum(['train', 'eval']).default('train'),
});
export type EnvConfig = z.infer<typeof EnvConfigSchema>;
/** What callers may pass: any subset, nested reward settings included. */
export type EnvConfigInput = z.input<typeof EnvConfigSchema>;
/** `train` (shaped reward) or `eval` (terminal reward only); see EnvConfigSchema.rewardMode. */
export type RewardMode = EnvConfig['rewardMode'];

/** Configs produced by parseEnvConfig: a runtime parses once and its environments reuse the result. */
const parsedConfigs = new WeakSet<object>();

/**
 * Parse an episode config (AppError VALIDATION naming the bad fields). A
 * config this function returned earlier is passed through untouched, so the
 * thousands of environments a server or worker creates do not re-validate
 * their runtime's config.
 */
export function parseEnvConfig(input: EnvConfigInput | EnvConfig = {}): EnvConfig {
  if (parsedConfigs.has(input)) return input as EnvConfig;
  const parsed = EnvConfigSchema.safeParse(input);
  if (!parsed.success) throw new AppError(ErrorCode.VALIDATION, `invalid environment config: ${formatZodIssues(parsed.error)}`);
  parsedConfigs.add(parsed.data);
  return parsed.data;
}
