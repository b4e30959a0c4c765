import { z } from 'zod';
import type { RemoteInferenceOptions } from '@sqlenv/rollout';
import { isAppError, type Logger } from '@sqlenv/shared';
import type { FlagSpec } from '../flags.ts';
import { UsageError } from '../cli-error.ts';

/**
 * Remote sampling on inference servers speaking vLLM's OpenAI-compatible contract (vLLM, or
 * `sqlenv serve-model`), for eval, play, train, learn and worker; and the adapter share through
 * which the trainer hands each version to the servers (train, learn, trainer, worker).
 */
export const inferenceOptionSpecs = {
  'inference-url': { key: 'inferenceUrl', env: 'SQLENV_INFERENCE_URL' },
  'inference-api-key': { key: 'inferenceApiKey', env: 'SQLENV_INFERENCE_API_KEY' },
  'inference-model': { key: 'inferenceModel', env: 'SQLENV_INFERENCE_MODEL' },
  'inference-concurrency': { key: 'inferenceConcurrency', env: 'SQLENV_INFERENCE_CONCURRENCY' },
} satisfies Record<string, FlagSpec>;

export const adapterShareOptionSpecs = {
  'adapter-share': { key: 'adapterShare', env: 'SQLENV_ADAPTER_SHARE' },
  'adapter-share-as': { key: 'adapterShareAs', env: 'SQLENV_ADAPTER_SHARE_AS' },
} satisfies Record<string, FlagSpec>;

export const InferenceOptionsSchema = z.object({
  /** Inference servers, comma-separated base URLs (`http://host:8000`); absent: sample in process. */
  inferenceUrl: z.string().min(1).optional(),
  /** Bearer key of the servers (their `--api-key`). */
  inferenceApiKey: z.string().min(1).optional(),
  /** Served base model name; default: the one root model the servers list. */
  inferenceModel: z.string().min(1).optional(),
  /** Requests in flight per server. */
  inferenceConcurrency: z.coerce.number().int().positive().optional(),
});

export const AdapterShareOptionsSchema = z.object({
  /** Directory the trainer writes `<run>/v<N>/` adapters to and the servers load them from. */
  adapterShare: z.string().min(1).optional(),
  /** The share's path as the servers see it (a different mount point); default: --adapter-share. */
  adapterShareAs: z.string().min(1).optional(),
});
export type InferenceOptions = z.infer<typeof InferenceOptionsSchema> & Partial<z.infer<typeof AdapterShareOptionsSchema>>;

/**
 * The remote inference of these options (undefined: sample in process), refused with the reason
 * (exit 2) when it cannot give trajectories the trainer may use: a top-p < 1 or top-k run
 * (`sampling`), a training run without an adapter share, a server that does not answer, refuses
 * the key or does not serve the model (every server is asked now, before any episode).
 */
export async function startRemoteInference(options: InferenceOptions, use: { training: boolean; sampling?: { topP: number; topK: number }; logger: Logger }): Promise<RemoteInferenceOptions | undefined> {
  if (options.inferenceUrl === undefined) {
    // The key is left out: SQLENV_INFERENCE_API_KEY is serve-model's too, and may be set in a shell that samples in process.
    const stray = (['inferenceModel', 'inferenceConcurrency', 'adapterShareAs'] as const).filter((k) => options[k] !== undefined);
    if (stray.length > 0) throw new UsageError(`${stray.map(flagName).join(', ')} without --inference-url (SQLENV_INFERENCE_URL)`);
    return undefined;
  }
  const { InferencePool, InferencePoolConfigSchema, checkInferenceServers, remoteSamplingProblem } = await import('@sqlenv/agents');
  const urls = options.inferenceUrl.split(',').map((u) => u.trim()).filter((u) => u !== '');
  const pool = InferencePoolConfigSchema.safeParse({ urls, ...(options.inferenceApiKey === undefined ? {} : { apiKey: options.inferenceApiKey }), ...(options.inferenceConcurrency === undefined ? {} : { concurrency: options.inferenceConcurrency }) });
  if (!pool.success) throw new UsageError(`--inference-url ${options.inferenceUrl}: each server is an http(s) base URL (http://host:8000), comma-separated`);
  const problem = use.sampling === undefined ? null : remoteSamplingProblem(use.sampling);
  if (problem !== null) throw new UsageError(`refused: ${problem}`);
  if (use.training && options.adapterShare === undefined) throw new UsageError('training with --inference-url needs --adapter-share DIR (SQLENV_ADAPTER_SHARE): the servers load each policy version from there');
  try {
    await checkInferenceServers(new InferencePool(pool.data, use.logger), options.inferenceModel);
  } catch (error) {
    if (isAppError(error)) throw new UsageError(`--inference-url: ${error.message}`);
    throw error;
  }
  return {
    pool: pool.data,
    ...(options.inferenceModel === undefined ? {} : { model: options.inferenceModel }),
    ...(options.adapterShare === undefined ? {} : { adapterShare: options.adapterShare }),
    ...(options.adapterShareAs === undefined ? {} : { adapterShareAs: options.adapterShareAs }),
  };
}

/** Refuse, at start, an adapter share this process cannot write (the trainer's side). */
export async function checkAdapterShare(options: InferenceOptions): Promise<void> {
  if (options.adapterShare === undefined) return;
  const { checkAdapterShareWritable } = await import('@sqlenv/rollout');
  try {
    checkAdapterShareWritable(options.adapterShare);
  } catch (error) {
    if (isAppError(error)) throw new UsageError(error.message);
    throw error;
  }
}

function flagName(key: keyof InferenceOptions): string {
  const entry = Object.entries({ ...inferenceOptionSpecs, ...adapterShareOptionSpecs }).find(([, spec]) => spec.key === key);
  return `--${entry?.[0] ?? key}`;
}
