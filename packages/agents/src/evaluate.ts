import type { EpisodeDoneReason, EpisodeState, ResetOptions, SqlAction, StepInfo, StepResult, TrajectoryOutcome, TrajectoryStep, TrajectoryTurn } from '@sqlenv/protocol';
import { toAppError, appendAll, mulberry32 } from '@sqlenv/shared';
import type { Policy, PolicyLane } from './policy.ts';
import { passAtKs, type PassAtK } from './pass-at-k.ts';
import { runEpisode, type TurnEvent } from './run-episode.ts';

/**
 * The environment surface evaluate() needs. An in-process SqlEnvironment and
 * the remote client adapter both satisfy it (state may be async remotely;
 * `info` exists only in-process).
 */
export interface EvaluationEnvironment {
  reset(options?: ResetOptions): Promise<StepResult>;
  step(action: SqlAction): Promise<StepResult & { info?: StepInfo; correct?: boolean }>;
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
  /** Called after each turn of episode `index` (transcripts). */
  onTurn?: (index: number, event: TurnEvent) => void;
  /** The policy version recorded on turns of policies that record none (text policies). Default 0. */
  policyVersion?: number;
}

export interface EpisodeRecord {
  index: number;
  episode_id: string | null;
  question_id: string | null;
  db_id: string | null;
  /** The seed the environment and the policy were given. */
  seed: number;
  success: boolean;
  reward: number;
  steps: number;
  done_reason: EpisodeDoneReason | null;
  /** Set when the episode could not be played (policy or environment failure). */
  error: string | null;
  actions: Array<{ action_type: string; argument: string; reward: number | null; error: string }>;
  /** Turns whose reply held no valid tool call (LLM policies). */
  format_errors: number;
  /** Tokens of the whole conversation, prompt included (LLM policies; 0 for text policies). */
  context_tokens: number;
  /** Tokens the model wrote. */
  generated_tokens: number;
  /** Token-exact turns and steps, as a trajectory holds them. */
  turns: TrajectoryTurn[];
  trajectory_steps: TrajectoryStep[];
  /** The trajectory outcome (null when the episode could not be played). */
  outcome: TrajectoryOutcome | null;
  /** Unix epoch milliseconds when the episode started. */
  started_at_ms: number;
  env_ms: number;
  policy_ms: number;
}

export interface EvaluationReport {
  policy: string;
  episodes: number;
  success_rate: number;
  mean_reward: number;
  mean_steps: number;
  errors: number;
  /** Parse-error turns ÷ all turns (0 for text policies). */
  format_error_rate: number;
  /** Mean tokens of an episode's conversation (0 for text policies). */
  mean_tokens: number;
  /** Mean tokens the model wrote per episode. */
  mean_generated_tokens: number;
  /**
   * Share of the episodes with a reward breakdown whose last query returned the gold rows (the
   * reward's potential Φ = 1 when the episode ended): the policy found the answer. Null when no
   * episode reported a breakdown (an environment that does not send one).
   */
  gold_rows_rate: number | null;
  /**
   * Of those episodes, the share answered correctly (null when there are none): whether the policy
   * copies a result it has into its answer. 1 − this is the failure that no better SQL can fix.
   */
  answer_given_gold_rows: number | null;
  /**
   * pass@k for k = 1, 4, 8 (keys "1", "4", "8"): the share of questions solved by at least one of k
   * samples, estimated without bias from every sample of each question and averaged over questions;
   * null where some question was played fewer than k times. pass@k − pass@1 is what a policy
   * samples but does not reliably produce: the most that sharpening it (e.g. by RL) can add.
   */
  pass_at_k: PassAtK;
  /** Distinct questions played (pass@k's denominator). */
  questions: number;
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
  /** A pooled lane's next index by pool (deterministic engines: one pool per replica). */
  const nextInPool = new Map<number, number>();
  let finished = 0;
  /** The next episode a lane plays: the next of all, or of its pool (indices ≡ pool mod count). */
  const take = (pool: PolicyLane['pool']): number => {
    if (pool === undefined) return nextIndex++;
    const k = nextInPool.get(pool.index) ?? 0;
    nextInPool.set(pool.index, k + 1);
    return pool.index + k * pool.count;
  };

  // A lane plays episodes one after another, open from its first to its last (the policy's lane with
  // it), so a deterministic engine can wait for each lane's next turn; a pooled lane takes its
  // replica's share, so which episodes a replica plays does not depend on which lane finished first.
  const runLane = async (): Promise<void> => {
    const lane = policy.openLane?.();
    try {
      const env = await createEnvironment();
      try {
        for (;;) {
          const index = take(lane?.pool);
          if (index >= total) return;
          const questionId = options.questionIds?.[index];
          const reset: ResetOptions = questionId === undefined ? { seed: seed + index } : { question_id: questionId, seed: seed + index };
          const record = await playEpisode(env, policy, index, reset, maxActions, options.onTurn, options.policyVersion ?? 0, lane);
          records[index] = record;
          finished += 1;
          options.onProgress?.(finished, total, record);
        }
      } finally {
        await env.close();
      }
    } finally {
      lane?.close();
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
  onTurn: EvaluateOptions['onTurn'],
  policyVersion: number,
  lane: PolicyLane | undefined,
): Promise<EpisodeRecord> {
  const record: EpisodeRecord = {
    index,
    episode_id: null,
    // The question asked for, kept when the reset fails or the environment does not report it, so
    // the episode still counts for its question (pass@k, before/after pairing).
    question_id: reset.question_id ?? null,
    db_id: null,
    seed: reset.seed ?? index,
    success: false,
    reward: 0,
    steps: 0,
    done_reason: null,
    error: null,
    actions: [],
    format_errors: 0,
    context_tokens: 0,
    generated_tokens: 0,
    turns: [],
    trajectory_steps: [],
    outcome: null,
    started_at_ms: Date.now(),
    env_ms: 0,
    policy_ms: 0,
  };
  try {
    const first = await env.reset(reset);
    const state = await env.state();
    record.episode_id = state.episode_id;
    record.question_id = state.question_id ?? record.question_id;
    record.db_id = state.db_id;
    const actor = policy.begin({
      episodeId: state.episode_id ?? `episode-${index}`,
      questionId: state.question_id ?? '',
      dbId: state.db_id ?? '',
      seed: record.seed,
      ...(lane === undefined ? {} : { lockstep: { lane, order: index } }),
    });
    const run = await runEpisode(env, actor, first.observation, {
      maxTurns: maxActions,
      policyVersion: () => policyVersion,
      ...(onTurn === undefined ? {} : { onTurn: (event: TurnEvent) => onTurn(index, event) }),
    });
    record.steps = run.outcome.steps;
    record.reward = run.outcome.total_reward;
    record.success = run.outcome.correct;
    record.done_reason = run.outcome.done_reason;
    record.actions = run.steps.map((step) => ({ action_type: step.action.action_type, argument: step.action.argument, reward: step.reward, error: step.error }));
    record.format_errors = run.turns.filter((t) => t.parse_error !== null).length;
    record.context_tokens = run.turns.reduce((n, t) => n + t.prompt_ids.length + t.completion_ids.length, 0);
    record.generated_tokens = run.turns.reduce((n, t) => n + t.completion_ids.length, 0);
    record.turns = run.turns;
    record.trajectory_steps = run.steps;
    record.outcome = run.outcome;
    record.env_ms = run.envMs;
    record.policy_ms = run.policyMs;
    if (run.outcome.done_reason === 'turn_limit') record.error = `episode did not finish within ${maxActions} actions`;
  } catch (error) {
    record.error = toAppError(error).message;
  }
  return record;
}

function summarise(policyName: string, records: EpisodeRecord[]): EvaluationReport {
  const n = records.length;
  const mean = (values: number[]): number => (values.length === 0 ? 0 : values.reduce((a, b) => a + b, 0) / values.length);
  const turns = records.reduce((n, r) => n + r.turns.length, 0);
  const scored = records.filter((r) => finalPotential(r) !== null);
  const reached = scored.filter((r) => finalPotential(r) === 1);
  const outcomes = records.map((r) => ({ question: r.question_id ?? `episode ${r.index}`, success: r.success }));
  return {
    policy: policyName,
    episodes: n,
    success_rate: mean(records.map((r) => (r.success ? 1 : 0))),
    mean_reward: mean(records.map((r) => r.reward)),
    mean_steps: mean(records.map((r) => r.steps)),
    errors: records.filter((r) => r.error !== null).length,
    format_error_rate: turns === 0 ? 0 : records.reduce((n, r) => n + r.format_errors, 0) / turns,
    mean_tokens: mean(records.map((r) => r.context_tokens)),
    mean_generated_tokens: mean(records.map((r) => r.generated_tokens)),
    gold_rows_rate: scored.length === 0 ? null : reached.length / scored.length,
    answer_given_gold_rows: reached.length === 0 ? null : mean(reached.map((r) => (r.success ? 1 : 0))),
    pass_at_k: passAtKs(outcomes),
    questions: new Set(outcomes.map((o) => o.question)).size,
    records,
  };
}

/** Φ of the episode's last query result as its last step reported it (null: no step or no breakdown). */
function finalPotential(record: EpisodeRecord): number | null {
  const last = record.trajectory_steps.at(-1);
  return last?.reward_breakdown?.potential ?? null;
}

/**
 * The question ids an evaluation plays: all of `ids` in order ('all'), or N drawn with a seeded
 * shuffle (drawn again when N exceeds them). The same seed gives the same list, so two
 * evaluations of one run (before and after training) play the same questions.
 */
export function drawQuestionIds(ids: readonly string[], episodes: number | 'all', seed: number): string[] {
  if (episodes === 'all') return [...ids];
  const rng = mulberry32(seed);
  const out: string[] = [];
  while (out.length < episodes && ids.length > 0) {
    const round = [...ids];
    for (let i = round.length - 1; i > 0; i--) {
      const j = Math.floor(rng() * (i + 1));
      [round[i], round[j]] = [round[j] as string, round[i] as string];
    }
    appendAll(out, round.slice(0, episodes - out.length));
  }
  return out;
}
