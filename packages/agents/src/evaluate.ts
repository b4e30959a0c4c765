import type { EpisodeState, ResetOptions, SqlAction, StepInfo, StepResult } from '@sqlenv/protocol';
import { toAppError } from '@sqlenv/shared';
import type { Policy } from './policy.ts';

/**
 * The environment surface evaluate() needs. An in-process SqlEnvironment and
 * the remote client adapter both satisfy it (state may be async remotely;
 * `info` exists only in-process).
 */
export interface EvaluationEnvironment {
  reset(options?: ResetOptions): Promise<StepResult>;
  step(action: SqlAction): Promise<StepResult & { info?: StepInfo }>;
  state(): EpisodeState | Promise<EpisodeState>;
  close(): void | Promise<void>;
}

export interface EvaluateOptions {
  /** Questions to play, one episode each, in order. When absent, `episodes` resets are drawn by seed. */
  questionIds?: readonly string[];
  /** Number of episodes when questionIds is absent. Default 10. */
  episodes?: number;
  /** Base seed: episode i resets with seed + i. Default 0. */
  seed?: number;
  /** Episodes played at once (each on its own environment). Default 8. */
  concurrency?: number;
  /** Safety cap on actions per episode beyond the env's own budget. Default 100. */
  maxActionsPerEpisode?: number;
  /** Called after each finished episode. */
  onProgress?: (done: number, total: number, record: EpisodeRecord) => void;
}

export interface EpisodeRecord {
  index: number;
  episode_id: string | null;
  question_id: string | null;
  db_id: string | null;
  success: boolean;
  reward: number;
  steps: number;
  done_reason: string | null;
  /** Set when the episode could not be played (policy or environment failure). */
  error: string | null;
  actions: Array<{ action_type: string; argument: string; reward: number | null; error: string }>;
}

export interface EvaluationReport {
  policy: string;
  episodes: number;
  success_rate: number;
  mean_reward: number;
  mean_steps: number;
  errors: number;
  records: EpisodeRecord[];
}

/**
 * Play episodes with a policy and summarise them ("green agent" evaluation of
 * the original SQLEnv). A failing episode is recorded with its error and the
 * run goes on.
 */
export async function evaluate(
  createEnvironment: () => EvaluationEnvironment | Promise<EvaluationEnvironment>,
  policy: Policy,
  options: EvaluateOptions = {},
): Promise<EvaluationReport> {
  const seed = options.seed ?? 0;
  const total = options.questionIds?.length ?? options.episodes ?? 10;
  const concurrency = Math.max(1, Math.min(options.concurrency ?? 8, total));
  const maxActions = options.maxActionsPerEpisode ?? 100;
  const records: EpisodeRecord[] = new Array<EpisodeRecord>(total);
  let nextIndex = 0;
  let finished = 0;

  const runLane = async (): Promise<void> => {
    const env = await createEnvironment();
    try {
      for (;;) {
        const index = nextIndex++;
        if (index >= total) return;
        const questionId = options.questionIds?.[index];
        const reset: ResetOptions = questionId === undefined ? { seed: seed + index } : { question_id: questionId, seed: seed + index };
        const record = await playEpisode(env, policy, index, reset, maxActions);
        records[index] = record;
        finished += 1;
        options.onProgress?.(finished, total, record);
      }
    } finally {
      await env.close();
    }
  };
  await Promise.all(Array.from({ length: concurrency }, runLane));
  return summarise(policy.name, records);
}

async function playEpisode(
  env: EvaluationEnvironment,
  policy: Policy,
  index: number,
  reset: ResetOptions,
  maxActions: number,
): Promise<EpisodeRecord> {
  const record: EpisodeRecord = {
    index,
    episode_id: null,
    question_id: null,
    db_id: null,
    success: false,
    reward: 0,
    steps: 0,
    done_reason: null,
    error: null,
    actions: [],
  };
  try {
    let result = await env.reset(reset);
    const state = await env.state();
    record.episode_id = state.episode_id;
    record.question_id = state.question_id;
    record.db_id = state.db_id;
    const actor = policy.begin({
      episodeId: state.episode_id ?? `episode-${index}`,
      questionId: state.question_id ?? '',
      dbId: state.db_id ?? '',
      seed: reset.seed ?? index,
    });
    while (!result.done) {
      if (record.steps >= maxActions) throw new Error(`episode did not finish within ${maxActions} actions`);
      const action = await actor.act(result.observation);
      const outcome = await env.step(action);
      record.steps += 1;
      record.reward += outcome.reward ?? 0;
      record.actions.push({ action_type: action.action_type, argument: action.argument, reward: outcome.reward, error: outcome.observation.error });
      if (outcome.done) {
        record.done_reason = outcome.info?.done_reason ?? (action.action_type === 'ANSWER' ? 'answered' : 'budget_exhausted');
        // Remote environments carry no info; a correct answer is the only way to earn the terminal reward.
        record.success = outcome.info?.correct ?? (action.action_type === 'ANSWER' && (outcome.reward ?? 0) >= 0.5);
      }
      result = outcome;
    }
  } catch (error) {
    record.error = toAppError(error).message;
  }
  return record;
}

function summarise(policyName: string, records: EpisodeRecord[]): EvaluationReport {
  const n = records.length;
  const mean = (values: number[]): number => (values.length === 0 ? 0 : values.reduce((a, b) => a + b, 0) / values.length);
  return {
    policy: policyName,
    episodes: n,
    success_rate: mean(records.map((r) => (r.success ? 1 : 0))),
    mean_reward: mean(records.map((r) => r.reward)),
    mean_steps: mean(records.map((r) => r.steps)),
    errors: records.filter((r) => r.error !== null).length,
    records,
  };
}
