import type { Policy, PolicyEpisode } from '@sqlenv/agents';
import type {
  EpisodeDoneReason,
  EpisodeJob,
  ResetOptions,
  SqlAction,
  StepInfo,
  StepResult,
  Trajectory,
  TrajectoryStep,
  TrajectoryTurn,
} from '@sqlenv/protocol';

/**
 * The environment as the worker sees it: an in-process SqlEnvironment and a
 * remote client both fit. `info` is there in process; over the wire only the
 * StepResult travels, so the reward breakdown may be missing.
 */
export interface RolloutEnvironment {
  reset(options: ResetOptions): Promise<StepResult>;
  /** `correct` stands in for `info.correct` where the environment has no info (remote). */
  step(action: SqlAction): Promise<StepResult & { info?: StepInfo; correct?: boolean }>;
  close(): void | Promise<void>;
}

/** Makes a fresh environment per episode attempt (a retry never reuses a broken one). */
export interface EnvironmentSource {
  create(): RolloutEnvironment | Promise<RolloutEnvironment>;
}

/** The tokens of one turn, as an LLM policy recorded them. */
export interface TurnTokens {
  prompt_ids: number[];
  completion_ids: number[];
  loss_mask: Array<0 | 1>;
  logprobs: number[];
  parse_error: string | null;
}

/**
 * Optional extension of a PolicyEpisode: an LLM policy hands over the exact
 * tokens of the turn it just played (token-in/token-out; nothing is
 * re-tokenised later). Text-only policies don't implement it and their turns
 * carry empty token arrays.
 */
export interface TokenRecordingEpisode extends PolicyEpisode {
  takeTurnTokens(): TurnTokens;
}

function recordsTokens(episode: PolicyEpisode): episode is TokenRecordingEpisode {
  return typeof (episode as Partial<TokenRecordingEpisode>).takeTurnTokens === 'function';
}

export interface PlayEpisodeDeps {
  environments: EnvironmentSource;
  policy: Policy;
  /** The newest policy version this worker knows of; read at every turn boundary. */
  currentVersion: () => number;
  workerId: string;
  maxTurns: number;
}

export interface PlayEpisodeAttempt {
  attempt: number;
  queueWaitMs: number;
}

const EMPTY_TOKENS: TurnTokens = { prompt_ids: [], completion_ids: [], loss_mask: [], logprobs: [], parse_error: null };

/**
 * Play one episode of a job to the end and return its token-exact trajectory.
 * Everything here awaits (executor pool, inference thread, network): nothing
 * blocks the event loop, so queue locks keep renewing while it runs.
 */
export async function playEpisode(job: EpisodeJob, attempt: PlayEpisodeAttempt, deps: PlayEpisodeDeps): Promise<Trajectory> {
  const startedAtMs = Date.now();
  const started = performance.now();
  let envMs = 0;
  let policyMs = 0;
  const env = await deps.environments.create();
  try {
    let t = performance.now();
    const reset = await env.reset({ seed: job.seed, episode_id: job.episode_id, question_id: job.question_id });
    envMs += performance.now() - t;
    const actor = deps.policy.begin({ episodeId: job.episode_id, questionId: job.question_id, dbId: job.db_id, seed: job.seed });

    const turns: TrajectoryTurn[] = [];
    const steps: TrajectoryStep[] = [];
    let observation = reset.observation;
    let done = reset.done;
    let totalReward = 0;
    let correct = false;
    let doneReason: EpisodeDoneReason = 'turn_limit';
    let lastError: string | null = null;

    for (let turn = 0; turn < deps.maxTurns && !done; turn++) {
      // The job's admitted version is a floor: the coordinator saw it before
      // admitting, even if this worker's notice has not arrived yet.
      const policyVersion = Math.max(deps.currentVersion(), job.admitted_version);
      t = performance.now();
      const action = await actor.act(observation);
      const turnPolicyMs = performance.now() - t;
      policyMs += turnPolicyMs;
      const tokens = recordsTokens(actor) ? actor.takeTurnTokens() : EMPTY_TOKENS;
      turns.push({ turn, policy_version: policyVersion, ...tokens, action, policy_ms: turnPolicyMs });

      t = performance.now();
      const outcome = await env.step(action);
      const stepMs = performance.now() - t;
      envMs += stepMs;
      const reward = outcome.reward ?? 0;
      totalReward += reward;
      observation = outcome.observation;
      done = outcome.done;
      lastError = observation.error === '' ? null : observation.error;
      steps.push({
        action,
        reward,
        reward_breakdown: outcome.info?.reward_breakdown ?? null,
        executed: outcome.info?.executed ?? observation.error === '',
        error: observation.error,
        done,
        env_ms: stepMs,
      });
      if (done) {
        correct = outcome.info?.correct ?? outcome.correct ?? false;
        doneReason = outcome.info?.done_reason ?? (action.action_type === 'ANSWER' ? 'answered' : 'budget_exhausted');
      }
    }

    return {
      schema_version: 1,
      run_id: job.run_id,
      episode_id: job.episode_id,
      group_id: job.group_id,
      index: job.index,
      question_id: job.question_id,
      db_id: job.db_id,
      seed: job.seed,
      policy: deps.policy.name,
      attempt: attempt.attempt,
      worker_id: deps.workerId,
      started_at_ms: startedAtMs,
      turns,
      steps,
      outcome: { correct, total_reward: totalReward, steps: steps.length, done_reason: doneReason, error: lastError },
      timings: { queue_wait_ms: Math.max(0, attempt.queueWaitMs), env_ms: envMs, policy_ms: policyMs, total_ms: performance.now() - started },
    };
  } finally {
    await env.close();
  }
}
