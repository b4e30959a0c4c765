import { randomUUID } from 'node:crypto';
import {
  ActionType,
  MAX_ARGUMENT_CHARS,
  PARSE_ERROR_ACTION,
  fastResetOptions,
  fastSqlAction,
  type Cell,
  ResetOptionsSchema,
  SqlActionSchema,
  type EpisodeState,
  type QuestionRecord,
  type ResetOptions,
  type RewardBreakdown,
  type SqlAction,
  type SqlObservation,
  type StepInfo,
  type StepOutcome,
  type StepResult,
} from '@sqlenv/protocol';
import { AppError, ErrorCode, formatZodIssues, isAppError, silentLogger, type Logger } from '@sqlenv/shared';
import { quoteIdentifier, type QueryResult, type SqlExecutor } from '../sandbox/index.ts';
import { combineBreakdowns, createRewardTracker, profileGold, type GoldProfile, type RewardTracker } from '../reward/index.ts';
import { answerSimilarity, verifyAnswer } from '../verifier/index.ts';
import { parseEnvConfig, type EnvConfig, type EnvConfigInput } from '../config/env-config.ts';
import type { Dataset, DatabaseInfo } from '../dataset/dataset.ts';
import { isDoubleQuotedStringError, singleQuoteStrings } from './double-quoted-strings.ts';
import { historyEntry, oneLine, renderDescribe, renderSchemaInfo, unknownTableMessage } from './episode-text.ts';
import { renderResult } from './render-result.ts';
import { resolveTable } from './resolve-table.ts';
import { SampleCache } from './sample-cache.ts';
import { seededIndex } from './seeded-index.ts';

export interface SqlEnvironmentDeps {
  dataset: Dataset;
  executor: SqlExecutor;
  /** Episode limits; parsed once here (a runtime passes its already-parsed config). */
  config?: EnvConfigInput;
  logger?: Logger;
  /** SAMPLE results shared between environments; each environment makes its own when absent. */
  sampleCache?: SampleCache;
}

/** Per-episode state: kept small (shared question/database objects, a few strings). */
interface Episode {
  id: string;
  question: QuestionRecord;
  db: DatabaseInfo;
  stepCount: number;
  budgetRemaining: number;
  done: boolean;
  totalReward: number;
  described: Set<string>;
  history: string[];
  tracker: RewardTracker;
  /** A step is awaiting the executor: a second concurrent step is refused. */
  busy: boolean;
}

/** What one tool did, before budget and reward bookkeeping. */
interface ToolOutcome {
  result: string;
  error: string;
  /** The action_history suffix after `->`. */
  summary: string;
  ok: boolean;
  rows?: Cell[][];
  sqlMs?: number;
}

/** Executor failures that are the agent's doing: they become error observations, not exceptions. */
const agentErrorCodes = new Set<string>([ErrorCode.SQL_REJECTED, ErrorCode.SQL_ERROR, ErrorCode.TIMEOUT, ErrorCode.EXECUTOR_CRASHED]);

/**
 * One SQLEnv episode at a time (docs/architecture.md, "The environment"). Cheap to
 * create: the dataset, schemas, executor and sample cache are shared; an
 * episode holds its question reference, a history and the reward tracker.
 */
export class SqlEnvironment {
  readonly config: EnvConfig;
  readonly #dataset: Dataset;
  readonly #executor: SqlExecutor;
  readonly #logger: Logger;
  readonly #samples: SampleCache;
  #episode: Episode | undefined;
  #closed = false;

  constructor(deps: SqlEnvironmentDeps) {
    this.config = parseEnvConfig(deps.config);
    this.#dataset = deps.dataset;
    this.#executor = deps.executor;
    this.#logger = deps.logger ?? silentLogger;
    this.#samples = deps.sampleCache ?? new SampleCache();
  }

  /** Start an episode: pick the question (seeded, or by id / database / split) and show it with the table names. */
  reset(options: ResetOptions = {}): Promise<StepResult> {
    this.#assertOpen();
    const parsed = parseResetOptions(options);
    const question = this.#pickQuestion(parsed);
    const db = this.#dataset.databases.get(question.database_name) as DatabaseInfo;
    this.#episode = {
      id: parsed.episode_id ?? randomUUID(),
      question,
      db,
      stepCount: 0,
      budgetRemaining: this.config.stepBudget,
      done: false,
      totalReward: 0,
      described: new Set(),
      history: [],
      tracker: createRewardTracker(this.config.reward, goldProfileOf(question)),
      busy: false,
    };
    return Promise.resolve({ observation: this.#observation(this.#episode, '', ''), reward: null, done: false });
  }

  /**
   * Apply one action. Invalid input → AppError(VALIDATION); a step with no open
   * episode, after done, or while another step runs → AppError(EPISODE_STATE).
   * Agent mistakes (unknown table, bad SQL, an argument over MAX_ARGUMENT_CHARS) come
   * back as observations with `error` set; an oversized argument counts as a format error.
   */
  async step(action: SqlAction): Promise<StepOutcome> {
    this.#assertOpen();
    const parsed = parseAction(action);
    const episode = this.#episode;
    if (episode === undefined) throw new AppError(ErrorCode.EPISODE_STATE, 'no episode: call reset() first');
    if (episode.done) throw new AppError(ErrorCode.EPISODE_STATE, `episode ${episode.id} is done: call reset() to start another`);
    if (episode.busy) throw new AppError(ErrorCode.EPISODE_STATE, `episode ${episode.id} is already running a step`);
    episode.busy = true;
    try {
      return await this.#apply(episode, parsed);
    } finally {
      episode.busy = false;
    }
  }

  state(): EpisodeState {
    const e = this.#episode;
    return {
      episode_id: e?.id ?? null,
      step_count: e?.stepCount ?? 0,
      question_id: e?.question.question_id ?? null,
      db_id: e?.db.dbId ?? null,
      budget_remaining: e?.budgetRemaining ?? this.config.stepBudget,
      done: e?.done ?? false,
      total_reward: e?.totalReward ?? 0,
    };
  }

  /** Forget the episode; later calls fail with EPISODE_STATE. Idempotent. Shared resources stay open (the runtime owns them). */
  close(): void {
    this.#closed = true;
    this.#episode = undefined;
  }

  #assertOpen(): void {
    if (this.#closed) throw new AppError(ErrorCode.EPISODE_STATE, 'environment is closed');
  }

  #pickQuestion(options: ResetOptions): QuestionRecord {
    if (options.question_id !== undefined) {
      const question = this.#dataset.question(options.question_id);
      if (question === undefined) throw new AppError(ErrorCode.NOT_FOUND, `unknown or unplayable question '${options.question_id}'`);
      return question;
    }
    const split = options.split ?? this.#dataset.defaultSplit;
    if (!this.#dataset.splits.includes(split)) {
      throw new AppError(ErrorCode.NOT_FOUND, `dataset ${this.#dataset.name} has no split '${split}' (it has: ${this.#dataset.splits.join(', ')})`);
    }
    if (options.db_id !== undefined && !this.#dataset.databases.has(options.db_id)) {
      throw new AppError(ErrorCode.NOT_FOUND, `dataset ${this.#dataset.name} has no database '${options.db_id}'`);
    }
    const pool = this.#dataset.questionsOf(split, options.db_id);
    if (pool.length === 0) throw new AppError(ErrorCode.NOT_FOUND, `no playable question for database '${options.db_id ?? ''}' in split '${split}'`);
    const index = options.seed === undefined ? Math.floor(Math.random() * pool.length) : seededIndex(options.seed, pool.length);
    return pool[index] as QuestionRecord;
  }

  async #apply(episode: Episode, action: SqlAction): Promise<StepOutcome> {
    // Too long to act on: the agent's mistake, answered like a malformed action (as the
    // LLM harness's tool-call parser does), never run, verified or thrown.
    const oversized = action.argument.length > MAX_ARGUMENT_CHARS;
    const outcome = oversized ? oversizedOutcome(action) : await this.#runTool(episode, action);
    if (this.#episode !== episode) {
      // reset() or close() ran while the tool was awaiting: this step's episode is gone.
      throw new AppError(ErrorCode.EPISODE_STATE, `episode ${episode.id} was reset during the step`);
    }
    episode.stepCount += 1;
    episode.budgetRemaining -= 1;
    episode.history.push(historyEntry(action.action_type, action.argument, outcome.summary, this.config.historyArgumentChars));

    let breakdown: RewardBreakdown;
    const info: StepInfo = { reward_breakdown: zeroBreakdown, executed: outcome.ok };
    if (outcome.sqlMs !== undefined) info.sql_ms = outcome.sqlMs;
    if (action.action_type === PARSE_ERROR_ACTION || oversized) {
      breakdown = episode.tracker.onFormatError();
      if (episode.budgetRemaining <= 0) {
        breakdown = combineBreakdowns(breakdown, episode.tracker.onBudgetExhausted());
        episode.done = true;
        info.correct = false;
        info.done_reason = 'budget_exhausted';
      }
    } else if (action.action_type === ActionType.ANSWER) {
      const correct = verifyAnswer(action.argument, episode.question, this.config.floatMatch).correct;
      const similarity = correct || this.config.reward.answerSimilarityScale === 0 ? 0 : answerSimilarity(action.argument, episode.question.gold_answer);
      breakdown = episode.tracker.onAnswer(correct, similarity);
      episode.done = true;
      info.correct = correct;
      info.done_reason = 'answered';
    } else {
      breakdown = episode.tracker.onStep({ actionType: action.action_type, argument: action.argument, ok: outcome.ok, rows: outcome.rows });
      if (episode.budgetRemaining <= 0) {
        breakdown = combineBreakdowns(breakdown, episode.tracker.onBudgetExhausted());
        episode.done = true;
        info.correct = false;
        info.done_reason = 'budget_exhausted';
      }
    }
    info.reward_breakdown = breakdown;
    // Evaluation shows the agent only what it earned by answering (config.rewardMode); info keeps the shaping.
    const reward = this.config.rewardMode === 'eval' ? breakdown.terminal : breakdown.total;
    episode.totalReward += reward;
    return { observation: this.#observation(episode, outcome.result, outcome.error), reward, done: episode.done, info };
  }

  #runTool(episode: Episode, action: SqlAction): Promise<ToolOutcome> {
    switch (action.action_type) {
      case ActionType.DESCRIBE:
        return Promise.resolve(this.#describe(episode, action.argument));
      case ActionType.SAMPLE:
        return this.#sample(episode, action.argument);
      case ActionType.QUERY:
        return this.#query(episode, action.argument);
      case ActionType.ANSWER:
        return Promise.resolve({ result: `Answer submitted: ${oneLine(action.argument, 200)}`, error: '', summary: 'submitted', ok: true });
      case PARSE_ERROR_ACTION: {
        // The harness says what was wrong; shown as the error, bounded like any result text.
        const message = action.argument.trim() === '' ? 'the output held no valid action' : action.argument.slice(0, this.config.resultMaxChars);
        return Promise.resolve({ result: '', error: message, summary: 'rejected', ok: false });
      }
    }
  }

  #describe(episode: Episode, argument: string): ToolOutcome {
    const name = resolveTable(episode.db.tableIndex, argument);
    const table = name === undefined ? undefined : episode.db.tables.find((t) => t.name === name);
    if (table === undefined) return errorOutcome(unknownTableMessage(argument, episode.db));
    episode.described.add(table.name);
    return { result: renderDescribe(table, this.config.resultMaxChars), error: '', summary: 'ok', ok: true };
  }

  async #sample(episode: Episode, argument: string): Promise<ToolOutcome> {
    const name = resolveTable(episode.db.tableIndex, argument);
    if (name === undefined) return errorOutcome(unknownTableMessage(argument, episode.db));
    const { sampleRows, resultMaxChars, queryTimeoutMs } = this.config;
    const startedMs = performance.now();
    try {
      const sample = await this.#samples.get(episode.db.path, name, sampleRows, () =>
        this.#executor.query(episode.db.path, `SELECT * FROM ${quoteIdentifier(name)} LIMIT ${sampleRows}`, { maxRows: sampleRows, timeoutMs: queryTimeoutMs }),
      );
      const result = renderResult({ ...sample, truncated: false }, { maxRows: sampleRows, maxChars: resultMaxChars });
      return { result, error: '', summary: 'ok', ok: true, sqlMs: performance.now() - startedMs };
    } catch (error) {
      return this.#sqlFailure(episode, error, performance.now() - startedMs);
    }
  }

  async #query(episode: Episode, sql: string): Promise<ToolOutcome> {
    if (sql.trim() === '') return errorOutcome('QUERY needs an SQL SELECT statement as its argument');
    const startedMs = performance.now();
    try {
      const result = await this.#runAgentSql(episode.db, sql);
      const text = renderResult(result, { maxRows: this.config.resultMaxRows, maxChars: this.config.resultMaxChars });
      const count = `${result.rows.length}${result.truncated ? '+' : ''} ${result.rows.length === 1 && !result.truncated ? 'row' : 'rows'}`;
      return { result: text, error: '', summary: count, ok: true, rows: result.rows, sqlMs: performance.now() - startedMs };
    } catch (error) {
      return this.#sqlFailure(episode, error, performance.now() - startedMs);
    }
  }

  /** Run an agent's SQL, retrying once with double-quoted strings made literals when that is what failed (config.doubleQuotedStrings). */
  async #runAgentSql(db: DatabaseInfo, sql: string): Promise<QueryResult> {
    const options = { maxRows: this.config.queryMaxRows, timeoutMs: this.config.queryTimeoutMs };
    try {
      return await this.#executor.query(db.path, sql, options);
    } catch (error) {
      if (this.config.doubleQuotedStrings !== 'accept' || !isAppError(error) || error.code !== ErrorCode.SQL_ERROR || !isDoubleQuotedStringError(error.message)) throw error;
      const rewritten = singleQuoteStrings(sql, db.knownNames);
      if (rewritten === sql) throw error;
      return this.#executor.query(db.path, rewritten, options);
    }
  }

  #sqlFailure(episode: Episode, error: unknown, sqlMs: number): ToolOutcome {
    if (!isAppError(error) || !agentErrorCodes.has(error.code)) throw error;
    if (error.code === ErrorCode.EXECUTOR_CRASHED) this.#logger.warn({ episodeId: episode.id, err: error }, 'executor crashed on an agent query');
    return { ...errorOutcome(error.message), sqlMs };
  }

  #observation(episode: Episode, result: string, error: string): SqlObservation {
    return {
      question: episode.question.question_text,
      schema_info: renderSchemaInfo(episode.db, episode.described),
      result,
      error,
      step_count: episode.stepCount,
      budget_remaining: episode.budgetRemaining,
      action_history: [...episode.history],
    };
  }
}

/**
 * Gold profiles computed once per question and shared by every episode on it
 * (GRPO plays each question G times). Keyed weakly by the dataset's own record.
 */
const goldProfiles = new WeakMap<QuestionRecord, GoldProfile>();
function goldProfileOf(question: QuestionRecord): GoldProfile {
  let profile = goldProfiles.get(question);
  if (profile === undefined) {
    profile = profileGold(question.gold_rows);
    goldProfiles.set(question, profile);
  }
  return profile;
}

function parseResetOptions(options: ResetOptions): ResetOptions {
  const fast = fastResetOptions(options);
  if (fast !== undefined) return fast;
  const parsed = ResetOptionsSchema.safeParse(options);
  if (!parsed.success) throw new AppError(ErrorCode.VALIDATION, `invalid reset options: ${formatZodIssues(parsed.error)}`);
  return parsed.data;
}

function parseAction(action: SqlAction): SqlAction {
  const fast = fastSqlAction(action);
  if (fast !== undefined) return fast;
  const parsed = SqlActionSchema.safeParse(action);
  if (!parsed.success) throw new AppError(ErrorCode.VALIDATION, `invalid action: ${formatZodIssues(parsed.error)}`);
  return parsed.data;
}

function oversizedOutcome(action: SqlAction): ToolOutcome {
  const message = `the ${action.action_type} argument is ${action.argument.length} characters long; the limit is ${MAX_ARGUMENT_CHARS}, so it was not acted on`;
  return { result: '', error: message, summary: 'rejected: argument too long', ok: false };
}

function errorOutcome(message: string): ToolOutcome {
  return { result: '', error: message, summary: `error: ${oneLine(message, 80)}`, ok: false };
}

const zeroBreakdown: RewardBreakdown = { operational: 0, progress: 0, potential: 0, terminal: 0, dense_unclipped: 0, dense: 0, total: 0 };
