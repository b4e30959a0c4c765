import { runEpisode, type Policy } from '@sqlenv/agents';
import { TRAJECTORY_SCHEMA_VERSION, type EpisodeJob, type ResetOptions, type SamplingSettings, type SqlAction, type StepInfo, type StepResult, type Trajectory } from '@sqlenv/protocol';

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

export interface PlayEpisodeDeps {
  environments: EnvironmentSource;
  policy: Policy;
  /** The newest policy version this worker knows of; read at every turn boundary (text policies; an LLM policy's turns carry the version that sampled them). */
  currentVersion: () => number;
  workerId: string;
  maxTurns: number;
  /** How the policy samples (recorded in the trajectory); null for text policies. Default null. */
  sampling?: SamplingSettings | null;
}

export interface PlayEpisodeAttempt {
  attempt: number;
  queueWaitMs: number;
}

/**
 * Play one episode of a job to the end and return its token-exact trajectory
 * (the loop itself is `runEpisode` of @sqlenv/agents, shared with evaluate()).
 * Everything here awaits (executor pool, inference thread, network): nothing
 * blocks the event loop, so queue locks keep renewing while it runs.
 */
export async function playEpisode(job: EpisodeJob, attempt: PlayEpisodeAttempt, deps: PlayEpisodeDeps): Promise<Trajectory> {
  const startedAtMs = Date.now();
  const started = performance.now();
  const env = await deps.environments.create();
  try {
    const t = performance.now();
    const reset = await env.reset({ seed: job.seed, episode_id: job.episode_id, question_id: job.question_id });
    const resetMs = performance.now() - t;
    const actor = deps.policy.begin({ episodeId: job.episode_id, questionId: job.question_id, dbId: job.db_id, seed: job.seed });
    const run = await runEpisode(env, actor, reset.observation, {
      maxTurns: deps.maxTurns,
      // The job's admitted version is a floor: the coordinator saw it before
      // admitting, even if this worker's notice has not arrived yet.
      policyVersion: () => Math.max(deps.currentVersion(), job.admitted_version),
    });
    return {
      schema_version: TRAJECTORY_SCHEMA_VERSION,
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
      sampling: deps.sampling ?? null,
      turns: run.turns,
      steps: run.steps,
      outcome: run.outcome,
      timings: { queue_wait_ms: Math.max(0, attempt.queueWaitMs), env_ms: resetMs + run.envMs, policy_ms: run.policyMs, total_ms: performance.now() - started },
    };
  } finally {
    await env.close();
  }
}
