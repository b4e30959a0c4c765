import { AppError, ErrorCode } from '@sqlenv/shared';
import { logprobTemperature, type SamplingSettings, type Trajectory, type TrajectoryTurn } from './trajectory.ts';

/**
 * One trajectory as one training sequence, the way every trainer must read it
 * (GRPO, SFT, the log-prob checks): the concatenation, in turn order, of each
 * turn's `prompt_ids ++ completion_ids` is exactly the context the model saw
 * and what it sampled — nothing is re-rendered or re-tokenised.
 *
 * Alignment: `logprobs[i]` and `policy_versions[i]` belong to `input_ids[i]`,
 * the token predicted from `input_ids[< i]`. Where `loss_mask[i] = 0` (prompt,
 * observations, template glue) they are 0 and −1. A scoring graph run over
 * `input_ids` at `temperature` gives, at every masked position, the
 * behaviour policy's own log-prob when the adapter is the one of
 * `policy_versions[i]`.
 */
export interface TrainingSequence {
  input_ids: number[];
  /** 1 on the model's own sampled tokens (incl. the closing `<|im_end|>`), 0 elsewhere. */
  loss_mask: Array<0 | 1>;
  /** Behaviour log-prob of each masked token at `temperature` (full softmax); 0 elsewhere. */
  logprobs: number[];
  /** Policy version that sampled each masked token; −1 elsewhere. */
  policy_versions: number[];
  /** The temperature the log-probs are at: the sampling temperature; 1 for greedy and when none is recorded (version 1, scripted). */
  temperature: number;
}

/**
 * A trajectory's training sequence. AppError VALIDATION when it has no tokens
 * (a text-only policy such as the oracle) or its turns are inconsistent.
 */
export function trainingSequence(trajectory: Trajectory): TrainingSequence {
  const sequence = sequenceFromTurns(trajectory.turns, trajectory.sampling ?? null, `trajectory ${trajectory.episode_id}`);
  if (sequence.input_ids.length === 0) {
    throw new AppError(ErrorCode.VALIDATION, `trajectory ${trajectory.episode_id} has no tokens (policy ${trajectory.policy}): nothing to train on`);
  }
  return sequence;
}

/** The same reading for turns without their trajectory (evaluation records, SFT data); may be empty. */
export function sequenceFromTurns(turns: readonly TrajectoryTurn[], sampling: SamplingSettings | null, label = 'turns'): TrainingSequence {
  const sequence: TrainingSequence = { input_ids: [], loss_mask: [], logprobs: [], policy_versions: [], temperature: sampling === null ? 1 : logprobTemperature(sampling) };
  for (const turn of turns) {
    const n = turn.prompt_ids.length + turn.completion_ids.length;
    if (turn.loss_mask.length !== n || turn.logprobs.length !== turn.completion_ids.length) {
      throw new AppError(ErrorCode.VALIDATION, `${label} turn ${turn.turn}: loss_mask/logprobs do not match its tokens`);
    }
    for (const id of turn.prompt_ids) {
      sequence.input_ids.push(id);
      sequence.loss_mask.push(0);
      sequence.logprobs.push(0);
      sequence.policy_versions.push(-1);
    }
    turn.completion_ids.forEach((id, j) => {
      const mask = turn.loss_mask[turn.prompt_ids.length + j] as 0 | 1;
      sequence.input_ids.push(id);
      sequence.loss_mask.push(mask);
      sequence.logprobs.push(mask === 1 ? (turn.logprobs[j] as number) : 0);
      sequence.policy_versions.push(mask === 1 ? turn.policy_version : -1);
    });
  }
  return sequence;
}
