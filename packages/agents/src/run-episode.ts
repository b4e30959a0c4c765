import {
  PARSE_ERROR_ACTION,
  type EpisodeDoneReason,
  type SqlAction,
  type SqlObservation,
  type StepInfo,
  type StepResult,
  type TrajectoryOutcome,
  type TrajectoryStep,
  type TrajectoryTurn,
} from '@sqlenv/protocol';
import { isPolicyStop, recordsTokens, type PolicyEpisode, type PolicyStop, type TurnTokens } from './policy.ts';

/**
 * The environment as an episode needs it, after reset: an in-process
 * SqlEnvironment and a remote client both fit. `info` exists in process; a
 * remote adapter may set `correct` instead.
 */
export interface EpisodeEnvironment {
  step(action: SqlAction): Promise<StepResult & { info?: StepInfo; correct?: boolean }>;
}

/** One turn as it happened, for transcripts (`sqlenv play --policy model`, `eval --verbose`). */
export interface TurnEvent {
  turn: number;
  /** What the model wrote (null for text-only policies). */
  text: string | null;
  /** The action sent, or the stop. */
  move: SqlAction | PolicyStop;
  parseError: string | null;
  /** The environment's answer (absent after a stop). */
  observation?: SqlObservation;
  reward?: number;
  done: boolean;
  policyVersion: number;
}

export interface RunEpisodeOptions {
  /** Safety net on policy turns; reached → done_reason 'turn_limit'. */
  maxTurns: number;
  /** Policy version for turns whose policy records none (text policies). */
  policyVersion: () => number;
  onTurn?: (event: TurnEvent) => void;
}

export interface EpisodeRun {
  turns: TrajectoryTurn[];
  steps: TrajectoryStep[];
  outcome: TrajectoryOutcome;
  envMs: number;
  policyMs: number;
}

/**
 * Play an episode from its first observation to the end: ask the policy,
 * step the environment, record turns (token-exact where the policy records
 * tokens) and steps. The one loop behind `evaluate()` and the rollout worker.
 * A PARSE_ERROR action is stepped like any other (the environment charges it);
 * a policy stop ends the episode with its reason, no step taken.
 */
export async function runEpisode(env: EpisodeEnvironment, actor: PolicyEpisode, first: SqlObservation, options: RunEpisodeOptions): Promise<EpisodeRun> {
  try {
    return await runTurns(env, actor, first, options);
  } finally {
    actor.close?.();
  }
}

async function runTurns(env: EpisodeEnvironment, actor: PolicyEpisode, first: SqlObservation, options: RunEpisodeOptions): Promise<EpisodeRun> {
  const turns: TrajectoryTurn[] = [];
  const steps: TrajectoryStep[] = [];
  let observation = first;
  let done = false;
  let totalReward = 0;
  let correct = false;
  let doneReason: EpisodeDoneReason = 'turn_limit';
  let lastError: string | null = null;
  let envMs = 0;
  let policyMs = 0;

  for (let turn = 0; turn < options.maxTurns && !done; turn++) {
    const fallbackVersion = options.policyVersion();
    let t = performance.now();
    const move = await actor.act(observation);
    const turnPolicyMs = performance.now() - t;
    policyMs += turnPolicyMs;
    const tokens: TurnTokens | null = recordsTokens(actor) ? actor.takeTurnTokens() : null;
    const policyVersion = tokens?.policy_version ?? fallbackVersion;
    if (isPolicyStop(move)) {
      // Nothing was sampled (the prompt alone did not fit): no turn to record.
      doneReason = move.stop;
      options.onTurn?.({ turn, text: null, move, parseError: null, done: true, policyVersion });
      break;
    }
    const parseError = move.action_type === PARSE_ERROR_ACTION ? (tokens?.parse_error ?? move.argument) : null;
    turns.push({
      turn,
      policy_version: policyVersion,
      prompt_ids: tokens?.prompt_ids ?? [],
      completion_ids: tokens?.completion_ids ?? [],
      loss_mask: tokens?.loss_mask ?? [],
      logprobs: tokens?.logprobs ?? [],
      action: parseError === null ? move : null,
      parse_error: parseError,
      policy_ms: turnPolicyMs,
    });

    t = performance.now();
    const outcome = await env.step(move);
    const stepMs = performance.now() - t;
    envMs += stepMs;
    const reward = outcome.reward ?? 0;
    totalReward += reward;
    observation = outcome.observation;
    done = outcome.done;
    lastError = observation.error === '' ? null : observation.error;
    steps.push({
      action: move,
      reward,
      reward_breakdown: outcome.info?.reward_breakdown ?? null,
      executed: outcome.info?.executed ?? observation.error === '',
      error: observation.error,
      done,
      env_ms: stepMs,
    });
    if (done) {
      // Remote environments carry no info; a correct answer is the only way to earn the terminal reward.
      correct = outcome.info?.correct ?? outcome.correct ?? (move.action_type === 'ANSWER' && reward >= 0.5);
      doneReason = outcome.info?.done_reason ?? (move.action_type === 'ANSWER' ? 'answered' : 'budget_exhausted');
    }
    options.onTurn?.({ turn, text: tokens?.text ?? null, move, parseError, observation, reward, done, policyVersion });
  }
  return {
    turns,
    steps,
    outcome: { correct, total_reward: totalReward, steps: steps.length, done_reason: doneReason, error: lastError },
    envMs,
    policyMs,
  };
}
