import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ADAPTER_WEIGHTS_FILE } from '@sqlenv/model';
import type { RolloutRunSpec } from '@sqlenv/protocol';
import { adapterVersionDir, readSavedEvals, type SavedEval } from '@sqlenv/runs';
import { AppError, ErrorCode, mixSeeds } from '@sqlenv/shared';
import { summaryOfSpec, type RunSummary } from './coordinator.ts';
import type { Transport } from './transport/transport.ts';

/**
 * What runTraining needs to stop a run keeping its work and to continue it later: the interrupt's
 * error, the race of a phase against the signal, and the resumed GRPO phase's spec and weights.
 */

/** Where a resumed run continues: the last committed version, its learner parts, the episodes already resolved. */
export interface ResumeFrom {
  version: number;
  episodesDone: number;
  parts: Readonly<Record<string, Uint8Array>>;
}

/** A run stopped by its signal with its work kept; `continueWith` is what to run next. */
export class RunInterrupted extends AppError {
  readonly version: number;
  readonly reason: string;
  readonly report: string;
  readonly checkpoint: string;
  readonly adapters: readonly number[];

  constructor(info: { version: number; reason: string; report: string; checkpoint: string; adapters: readonly number[] }) {
    super(ErrorCode.ABORTED, `stopped by ${info.reason} at version ${info.version}`);
    this.version = info.version;
    this.reason = info.reason;
    this.report = info.report;
    this.checkpoint = info.checkpoint;
    this.adapters = info.adapters;
  }
}

/** The abort reason of a shutdown signal as a name (SIGINT, SIGTERM), whatever aborted it. */
export function abortReasonOf(signal: AbortSignal): string {
  return typeof signal.reason === 'string' ? signal.reason : 'SIGINT';
}

/** `promise`, or 'aborted' as soon as `signal` aborts (the promise is then left to settle unobserved). */
export async function unlessAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T | typeof ABORTED> {
  if (signal === undefined) return promise;
  promise.catch(() => undefined);
  if (signal.aborted) return ABORTED;
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<typeof ABORTED>((resolve) => {
    onAbort = () => resolve(ABORTED);
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([promise, aborted]);
  } finally {
    if (onAbort) signal.removeEventListener('abort', onAbort);
  }
}
export const ABORTED = Symbol('aborted');

/**
 * The GRPO phase's spec on the transport: a resumed one plays the episodes not yet resolved, from
 * the last committed version's adapter, with its own question order (seed mixed with the version)
 * and its own transport run id (the run directory keeps the run's).
 */
export function phaseSpec(spec: RolloutRunSpec, runDir: string, resume: ResumeFrom | undefined): RolloutRunSpec {
  if (resume === undefined) return spec;
  const adapter = resume.version > 0 && spec.model !== undefined ? adapterVersionDir(runDir, resume.version) : spec.model?.adapter;
  return {
    ...spec,
    // Its own id on the transport: a Redis still holding the stopped part's keys never mixes the two.
    run_id: `${spec.run_id.slice(0, 52)}-r${randomBytes(4).toString('hex')}`,
    episodes: spec.episodes - resume.episodesDone,
    seed: mixSeeds(spec.seed, resume.version + 1) & 0x7fffffff,
    ...(spec.model === undefined ? {} : { model: { ...spec.model, adapter: adapter ?? null } }),
  };
}

/** The summary of a resumed run whose GRPO phase had already played every episode (stopped during its last evaluation). */
export function emptySummary(spec: RolloutRunSpec, kind: Transport['kind'], version: number): RunSummary {
  return {
    ...summaryOfSpec(kind, spec),
    episodes_completed: 0,
    episodes_failed: 0,
    episodes_consumed: 0,
    groups_admitted: 0,
    groups_trained: 0,
    groups_dropped: 0,
    groups_failed: 0,
    failed_groups: [],
    duplicate_trajectories: 0,
    lost_episodes: 0,
    policy_version: version,
    batches: 0,
    reward_mean: null,
    success_rate: null,
    elapsed_s: 0,
    episodes_per_s: 0,
  };
}

/** The weights blob of a saved version (its adapter file), null for version 0 or a statistics run. */
export function savedWeights(runDir: string, version: number): Buffer | null {
  const file = join(adapterVersionDir(runDir, version), ADAPTER_WEIGHTS_FILE);
  return version > 0 && existsSync(file) ? readFileSync(file) : null;
}

/** A resumed run's kept evaluation: it must be this run's. */
export function keptEvaluation(runDir: string, name: string, runId: string): SavedEval | undefined {
  const saved = readSavedEvals(runDir).find((e) => e.name === name);
  if (saved !== undefined && saved.run_id !== runId) throw new AppError(ErrorCode.VALIDATION, `${runDir}: evaluation ${name} is not of run ${runId}`);
  return saved;
}

