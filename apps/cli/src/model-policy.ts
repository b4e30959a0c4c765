import { z } from 'zod';
import { transcriptTurn, type EpisodeRecord, type TranscriptTurn, type TurnEvent } from '@sqlenv/agents';
import { TRAJECTORY_SCHEMA_VERSION, TrajectorySchema, type SamplingSettings, type Trajectory } from '@sqlenv/protocol';
import type { ModelExecution, ModelResources } from '@sqlenv/rollout';
import type { Logger } from '@sqlenv/shared';
import { intFlag, positiveIntFlag } from './flags.ts';
import { UsageError } from './cli-error.ts';
import { ExecutionFlags, executionFlagOptions } from './execution-flags.ts';
import { InferenceOptionsSchema, inferenceOptionSpecs, startRemoteInference } from './commands/inference-options.ts';

/**
 * `--policy model` for `sqlenv eval` and `sqlenv play`: the flags, starting the
 * model policy (the same code a rollout worker runs), transcripts and
 * trajectory lines.
 */
export const modelFlagOptions = {
  model: { type: 'string' },
  adapter: { type: 'string' },
  prompt: { type: 'string' },
  temperature: { type: 'string' },
  'top-p': { type: 'string' },
  'top-k': { type: 'string' },
  'max-new-tokens': { type: 'string' },
  'context-tokens': { type: 'string' },
  thinking: { type: 'boolean' },
  ...executionFlagOptions,
  ...inferenceOptionSpecs,
} as const;

const numberFlag = z.coerce.number().finite();

export const ModelFlags = z.object({
  model: z.string().min(1).optional(),
  adapter: z.string().min(1).optional(),
  prompt: z.string().min(1).optional(),
  /** Evaluation samples greedily unless told otherwise (RL runs default to 1 in the run spec). */
  temperature: numberFlag.nonnegative().default(0),
  'top-p': numberFlag.gt(0).max(1).optional(),
  'top-k': intFlag.optional(),
  'max-new-tokens': positiveIntFlag.optional(),
  'context-tokens': positiveIntFlag.optional(),
  thinking: z.boolean().optional(),
}).extend(ExecutionFlags.shape).extend(InferenceOptionsSchema.shape);
export type ModelFlags = z.infer<typeof ModelFlags>;

/** Start the model policy from flags: one inference engine for all concurrent episodes, or the inference servers of --inference-url. */
export async function startModelPolicy(flags: ModelFlags, options: { maxBatchSize: number; logger: Logger; execution: ModelExecution | undefined; deterministic?: boolean }): Promise<ModelResources> {
  if (flags.model === undefined) throw new UsageError('--policy model needs --model DIR (config.json + safetensors; tokenizer.json for Qwen vocabularies)');
  if (options.deterministic === true && flags.inferenceUrl !== undefined) throw new UsageError(DETERMINISTIC_REMOTE);
  const rollout = await import('@sqlenv/rollout');
  const { modelFingerprint } = await import('@sqlenv/model');
  const { modelSpecFrom } = await import('./commands/model-options.ts');
  const spec = modelSpecFrom(
    {
      ...(flags.adapter === undefined ? {} : { adapter: flags.adapter }),
      ...(flags.prompt === undefined ? {} : { promptFile: flags.prompt }),
      temperature: flags.temperature,
      ...(flags['top-p'] === undefined ? {} : { topP: flags['top-p'] }),
      ...(flags['top-k'] === undefined ? {} : { topK: flags['top-k'] }),
      ...(flags['max-new-tokens'] === undefined ? {} : { maxNewTokens: flags['max-new-tokens'] }),
      ...(flags['context-tokens'] === undefined ? {} : { contextTokens: flags['context-tokens'] }),
      ...(flags.thinking === undefined ? {} : { thinking: flags.thinking }),
    },
    modelFingerprint(flags.model),
  );
  const remote = await startRemoteInference(flags, { training: false, sampling: { topP: spec.sampling.top_p, topK: spec.sampling.top_k }, logger: options.logger });
  if (remote !== undefined) return rollout.createRemoteModelResources(spec, flags.model, { remote, logger: options.logger });
  // Without an adapter the base model runs with no LoRA inputs at all.
  return rollout.createModelResources(spec, flags.model, {
    maxBatchSize: options.maxBatchSize,
    logger: options.logger,
    ...(options.execution === undefined ? {} : { execution: options.execution }),
    ...(flags.adapter === undefined ? { lora: null } : {}),
    ...(options.deterministic === true ? { deterministic: true } : {}),
  });
}

/** Why --deterministic is refused with --inference-url. */
export const DETERMINISTIC_REMOTE = '--deterministic needs the in-process engine: inference servers (--inference-url) batch requests as they arrive, so their tokens depend on timing; leave out one of the two';

/** One turn of a transcript: what the model wrote, the action, what the environment said, the reward. */
export function formatTurn(event: TurnEvent, episodeLabel: string): string {
  return formatTranscriptTurn(transcriptTurn(event), episodeLabel);
}

/** A transcript turn (live or from a saved evaluation) as terminal text. */
export function formatTranscriptTurn(turn: TranscriptTurn, episodeLabel: string): string {
  const lines = [`── ${episodeLabel} turn ${turn.turn + 1} (policy v${turn.policy_version})`];
  if (turn.text !== null) lines.push(`  model wrote: ${clip(turn.text, 600)}`);
  if (turn.stop !== null) {
    lines.push(`  stop: ${turn.stop}`);
    return `${lines.join('\n')}\n`;
  }
  lines.push(turn.action !== null ? `  action:      ${turn.action.action_type} ${clip(turn.action.argument, 300)}` : `  parse error: ${turn.parse_error ?? ''}`);
  if (turn.reward !== null) lines.push(turn.error === '' ? `  observation: ${clip(turn.result, 600)}` : `  error:       ${clip(turn.error, 300)}`);
  lines.push(`  reward:      ${(turn.reward ?? 0).toFixed(3)}${turn.done ? '  (done)' : ''}`);
  return `${lines.join('\n')}\n`;
}

function clip(text: string, maxChars: number): string {
  const oneLine = text.replaceAll('\n', '\n               ');
  return oneLine.length > maxChars ? `${oneLine.slice(0, maxChars)}…` : oneLine;
}

/** An evaluated episode as a protocol Trajectory (one `--trajectories` line), validated. */
export function recordTrajectory(record: EpisodeRecord, meta: { runId: string; policy: string; sampling: SamplingSettings | null }): Trajectory | undefined {
  if (record.outcome === null || record.question_id === null || record.db_id === null) return undefined;
  const episodeId = record.episode_id ?? `${meta.runId}-${record.index}`;
  return TrajectorySchema.parse({
    schema_version: TRAJECTORY_SCHEMA_VERSION,
    run_id: meta.runId,
    episode_id: episodeId,
    group_id: episodeId,
    index: 0,
    question_id: record.question_id,
    db_id: record.db_id,
    seed: record.seed,
    policy: meta.policy,
    attempt: 1,
    worker_id: 'eval',
    started_at_ms: record.started_at_ms,
    sampling: meta.sampling,
    turns: record.turns,
    steps: record.trajectory_steps,
    outcome: record.outcome,
    timings: { queue_wait_ms: 0, env_ms: record.env_ms, policy_ms: record.policy_ms, total_ms: record.env_ms + record.policy_ms },
  });
}
