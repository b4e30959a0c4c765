import { randomBytes } from 'node:crypto';
import type { RolloutRunSpec, ScoredGroup, Trajectory, BatchStats } from '@sqlenv/protocol';
import { AppError, ErrorCode, silentLogger, type Logger } from '@sqlenv/shared';
import type { RolloutMetrics } from './metrics.ts';
import type { UpdateStats } from '@sqlenv/runs';
import { batchStats, scoreGroup } from './scoring.ts';
import { afterCommit, checkBatchTrajectories, resumeHousekeeping } from './trainer-housekeeping.ts';
import type { Transport, WeightsRetention } from './transport/transport.ts';
import { publishAdapterVersion, publishStartAdapter } from './resources/adapter-share.ts';
import { Wakeup } from './wakeup.ts';

/**
 * Fewest scored groups the trainer reads per look at the buffer (it reads max(this, 2 × B)). More
 * than B, so a full page always holds a batch or something to drop.
 */
const PENDING_PAGE_MIN_GROUPS = 16;

/** One batch handed to the policy updater. */
export interface TrainingBatch {
  /** The version this update produces. */
  version: number;
  /** Oldest first. */
  groups: readonly ScoredGroup[];
  /** trajectories[g][i]: episode i of groups[g], token-exact. */
  trajectories: readonly (readonly Trajectory[])[];
  stats: BatchStats;
}

/**
 * What the trainer calls to learn from a batch. The GRPO package supplies the
 * real one (forward + backward on ONNX Runtime, AdamW on LoRA tensors); the
 * trainer only needs weights in and weights out.
 */
export interface PolicyUpdater {
  /**
   * Load the last committed weights (null before the first update) at `version`; `readPart` reads
   * a part the update stored beside them (see PolicyUpdate.parts), null when there is none.
   */
  restore(weights: Buffer | null, version: number, readPart?: (name: string) => Promise<Buffer | null>): Promise<void>;
  /** Learn from one batch; returns the new weights blob to publish (and parts to keep with it). */
  update(batch: TrainingBatch): Promise<Buffer | PolicyUpdate>;
  /**
   * The learner's numbers of the last `update` (loss, KL, clip fraction, gradient norm, learning
   * rate, and any extra ones), read by the trainer right after each update for the run directory's
   * metrics.jsonl. Optional: an updater without it (StatsPolicyUpdater) records none.
   */
  lastUpdateStats?(): UpdateStats | null;
}

/** What an update publishes: the weights workers load, and parts only a trainer reads back. */
export interface PolicyUpdate {
  weights: Buffer;
  /** Stored as `<weights key>/<name>` and committed with the version (e.g. the optimizer state). */
  parts?: Record<string, Buffer>;
}

/** Where the trainer's wall time between two commits went, in seconds (a type, so that it is a record of numbers for the run directory). */
export type TrainerPhaseSeconds = {
  /** Waiting for scored groups (the learner idle for lack of rollouts). */
  rollout_wait: number;
  /** Reading the batch's trajectories. */
  read: number;
  /** The policy update (the GPU step of a real learner). */
  update: number;
  /** Writing the weights, the commit and the clean-up after it. */
  commit: number;
  /** Everything else: reading the buffer, dropping zero-variance groups, bookkeeping. */
  other: number;
};

/** What the trainer hands its `onCommitted` hook after each committed version (the run directory). */
export interface CommittedVersion {
  version: number;
  stats: BatchStats;
  /** trajectories[g][i]: episode i of group g of the batch. */
  trajectories: readonly (readonly Trajectory[])[];
  /** The weights blob published for this version. */
  weights: Buffer;
  /** Parts stored under the weights key (the learner's optimizer state). */
  parts?: Readonly<Record<string, Uint8Array>> | undefined;
  updateStats: UpdateStats | null;
  phaseSeconds: TrainerPhaseSeconds;
}

/**
 * The updater until a learner is wired in: it learns nothing, records the
 * batch statistics in its "weights" (so a restart carries them over) and
 * bumps the version.
 */
export class StatsPolicyUpdater implements PolicyUpdater {
  #batches: BatchStats[] = [];

  get batches(): readonly BatchStats[] {
    return this.#batches;
  }

  restore(weights: Buffer | null): Promise<void> {
    this.#batches = weights === null ? [] : (JSON.parse(weights.toString('utf8')) as { batches: BatchStats[] }).batches;
    return Promise.resolve();
  }

  update(batch: TrainingBatch): Promise<Buffer> {
    this.#batches.push(batch.stats);
    // Only the recent history: the blob stays small however long the run.
    if (this.#batches.length > 64) this.#batches = this.#batches.slice(-64);
    return Promise.resolve(Buffer.from(JSON.stringify({ kind: 'stats', version: batch.version, batches: this.#batches })));
  }
}

/**
 * Whether a weights blob is StatsPolicyUpdater's (JSON statistics, no weights):
 * a model policy then moves the version and keeps its adapter. Anything else is
 * an adapter (safetensors bytes, whose first 8 bytes are a binary header length).
 */
export function isStatsWeightsBlob(blob: Uint8Array): boolean {
  if (blob[0] !== 0x7b) return false;
  try {
    const json = JSON.parse(Buffer.from(blob).toString('utf8')) as { kind?: unknown };
    return json.kind === 'stats';
  } catch {
    return false;
  }
}

export interface TrainerOptions {
  transport: Transport;
  runId: string;
  updater: PolicyUpdater;
  /** Fallback poll of the scored buffer; a scored group wakes the loop sooner. Milliseconds. */
  pollMs: number;
  /** How long to wait for the coordinator to register the run before giving up, in milliseconds. */
  runWaitMs: number;
  logger?: Logger;
  metrics?: RolloutMetrics;
  signal?: AbortSignal;
  /** Called after each trained batch (progress bars). */
  onBatch?: (stats: BatchStats) => void;
  /** Which committed weights to keep (the rest are deleted after each commit); without it, all are kept. */
  retention?: WeightsRetention;
  /** Called after each commit, awaited (the run directory's metrics line and adapter snapshots). */
  onCommitted?: (committed: CommittedVersion) => void | Promise<void>;
  /**
   * The adapter share of remote inference servers (`--adapter-share`): each version's adapter is
   * written there as `<run>/v<N>/` before the version is committed (the starting adapter as v0).
   */
  adapterShare?: string;
}

export interface TrainerResult {
  /** True when the run finished; false when stopped by the signal. */
  finished: boolean;
  version: number;
  batchesThisProcess: number;
}

/**
 * The trainer loop: score finished groups, take scored groups oldest-first,
 * drop zero-variance ones (when the run says so), train on batches of
 * groups_per_batch, commit (groups consumed + version + weights key, atomically)
 * and publish. A restarted trainer resumes from the committed version and
 * weights; uncommitted work is simply redone, so each group is consumed once.
 */
export async function runTrainer(options: TrainerOptions): Promise<TrainerResult> {
  const { transport, runId, updater, pollMs } = options;
  const logger = (options.logger ?? silentLogger).child({ component: 'trainer', runId });
  const spec = await waitForRun(transport, runId, options.runWaitMs, pollMs, options.signal);
  const wakeup = new Wakeup();
  const groups = transport.consumeGroups(runId, (group, results) => scoreGroup(spec, group, results), {
    onScored: (scored) => {
      logger.debug({ groupId: scored.group_id, seq: scored.seq, rewardMean: scored.reward_mean, zeroVariance: scored.zero_variance }, 'group scored');
      wakeup.wake();
    },
  });
  const unsubscribe = await transport.subscribe(runId, () => wakeup.wake());
  const onAbort = (): void => wakeup.wake();
  options.signal?.addEventListener('abort', onAbort);

  const initial = await transport.counters(runId);
  let version = initial.policyVersion;
  const committedKey = initial.weightsKey;
  await updater.restore(
    committedKey === null ? null : ((await transport.blobs.get(committedKey)) ?? null),
    version,
    async (name) => (committedKey === null ? null : ((await transport.blobs.get(`${committedKey}/${name}`)) ?? null)),
  );
  logger.info({ version, trainedGroups: initial.trainedGroups }, 'trainer resumed');
  if (options.adapterShare !== undefined && spec.model?.adapter != null) publishStartAdapter(options.adapterShare, runId, spec.model.adapter);
  await resumeHousekeeping(transport, runId, logger);
  let batches = 0;
  let finished = false;
  const clock: PhaseClock = { since: performance.now(), waitSeconds: 0 };
  const waitForWork = async (): Promise<void> => {
    const waited = performance.now();
    await wakeup.wait(pollMs);
    const seconds = (performance.now() - waited) / 1000;
    clock.waitSeconds += seconds;
    options.metrics?.trainerWaitSeconds.inc({ run: runId }, seconds);
  };
  try {
    while (!options.signal?.aborted) {
      const counters = await transport.counters(runId);
      options.metrics?.observeCounters(runId, counters);
      if (counters.done) {
        finished = true;
        break;
      }
      if (counters.policyVersion !== version) throw new AppError(ErrorCode.ABORTED, `another trainer moved run ${runId} to version ${counters.policyVersion}`);
      // Nothing to do yet (no batch, nothing to drop, admission still open): skip reading the buffer.
      if (!spec.drop_zero_variance && counters.totalGroups === null && counters.scoredPending < spec.groups_per_batch) {
        await waitForWork();
        continue;
      }
      // The oldest page of the buffer, not all of it: a trainer that fell behind would otherwise
      // re-read (and re-parse) the whole growing buffer at every wake-up.
      const pageSize = Math.max(PENDING_PAGE_MIN_GROUPS, 2 * spec.groups_per_batch);
      const pending = await transport.pendingScored(runId, pageSize);
      const truncated = pending.length >= pageSize;
      const dropped = spec.drop_zero_variance ? pending.filter((g) => g.zero_variance) : [];
      const accepted = spec.drop_zero_variance ? pending.filter((g) => !g.zero_variance) : pending;
      if (dropped.length > 0) {
        await transport.commit(runId, { expectedVersion: version, newVersion: version, weightsKey: null, trained: [], dropped, trainedSlots: [], batch: null });
        await afterCommit(transport, runId, options.retention, logger);
        logger.info({ groups: dropped.map((g) => g.group_id) }, 'zero-variance groups dropped');
      }
      // Every group is trained, dropped or failed, or still out there: when the
      // ones still out there are exactly the buffered ones, nothing else will come.
      const resolved = counters.trainedGroups + counters.droppedGroups + dropped.length + counters.failedGroups;
      // A full page means more groups wait behind it: then either a batch is ready (accepted ≥ B) or
      // the page's zero-variance groups are dropped and the loop reads the next page.
      const allBuffered = !truncated && counters.totalGroups !== null && counters.totalGroups - resolved === accepted.length;
      if (accepted.length >= spec.groups_per_batch || (allBuffered && accepted.length > 0)) {
        version = await trainBatch(spec, accepted.slice(0, spec.groups_per_batch), version, options, logger, clock);
        batches += 1;
        continue;
      }
      if (allBuffered && accepted.length === 0) {
        await transport.markDone(runId);
        logger.info({ version }, 'run done');
        finished = true;
        break;
      }
      if (dropped.length > 0) continue;
      await waitForWork();
    }
  } finally {
    options.signal?.removeEventListener('abort', onAbort);
    await unsubscribe();
    await groups.close();
  }
  return { finished, version, batchesThisProcess: batches };
}

/** The trainer's time since its last commit: when it started, and how much of it was spent waiting. */
interface PhaseClock {
  since: number;
  waitSeconds: number;
}

async function trainBatch(spec: RolloutRunSpec, groups: readonly ScoredGroup[], version: number, options: TrainerOptions, logger: Logger, clock: PhaseClock): Promise<number> {
  const { transport, runId } = options;
  const started = performance.now();
  const newVersion = version + 1;
  // One read for the whole batch; trajectories[g][i] is episode i of group g.
  const flat = await transport.trajectories.getMany(groups.flatMap((g) => g.trajectory_keys));
  let offset = 0;
  const trajectories = groups.map((g) => flat.slice(offset, (offset += g.trajectory_keys.length)));
  const trainedSlots = checkBatchTrajectories(spec, groups, trajectories);
  const stats = batchStats(newVersion, groups, trajectories);
  const read = performance.now();
  const updated = await options.updater.update({ version: newVersion, groups, trajectories, stats });
  const { weights, parts } = Buffer.isBuffer(updated) ? { weights: updated, parts: undefined } : updated;
  const updateStats = options.updater.lastUpdateStats?.() ?? null;
  const updatedAt = performance.now();
  // Weights first, commit second: a crash in between leaves an unreferenced blob (deleted when a
  // trainer next resumes the run), never a dangling key. The key is unique to this attempt, so a stale
  // trainer's write never replaces weights a commit already recorded; retention reads the keys from
  // the commit history. Keys must start with `<run>/weights/` (sweepUncommittedWeights looks there).
  const weightsKey = `${runId}/weights/v${newVersion}-${randomBytes(4).toString('hex')}`;
  // Parts first: the version's key is what the commit records, and a part is only read through it.
  for (const [name, bytes] of Object.entries(parts ?? {})) await transport.blobs.put(`${weightsKey}/${name}`, bytes);
  await transport.blobs.put(weightsKey, weights);
  // In the share before the commit: a worker told of version N finds its adapter there.
  if (options.adapterShare !== undefined) publishAdapterVersion(options.adapterShare, runId, newVersion, weights);
  const { duplicateEpisodes } = await transport.commit(runId, { expectedVersion: version, newVersion, weightsKey, trained: groups, dropped: [], trainedSlots, batch: stats });
  if (duplicateEpisodes > 0) logger.error({ duplicateEpisodes }, 'trainer trained on episodes twice');
  await afterCommit(transport, runId, options.retention, logger);
  const committed = performance.now();
  const phaseSeconds: TrainerPhaseSeconds = {
    rollout_wait: clock.waitSeconds,
    read: (read - started) / 1000,
    update: (updatedAt - read) / 1000,
    commit: (committed - updatedAt) / 1000,
    other: Math.max(0, (committed - clock.since) / 1000 - clock.waitSeconds - (committed - started) / 1000),
  };
  clock.since = committed;
  clock.waitSeconds = 0;
  options.metrics?.staleness.observe({ run: runId }, stats.max_staleness);
  options.metrics?.trainerUpdateSeconds.inc({ run: runId }, (performance.now() - started) / 1000);
  logger.info({ version: newVersion, groups: stats.group_ids, rewardMean: stats.reward_mean, successRate: stats.success_rate, maxStaleness: stats.max_staleness }, 'batch trained');
  options.onBatch?.(stats);
  await options.onCommitted?.({ version: newVersion, stats, trajectories, weights, parts, updateStats, phaseSeconds });
  return newVersion;
}

/** The trainer may start before the coordinator: wait for the run's spec. */
export async function waitForRun(transport: Transport, runId: string, timeoutMs: number, pollMs: number, signal?: AbortSignal): Promise<RolloutRunSpec> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const spec = await transport.getRun(runId);
    if (spec) return spec;
    if (signal?.aborted) throw new AppError(ErrorCode.ABORTED, `stopped while waiting for run ${runId}`);
    if (performance.now() > deadline) throw new AppError(ErrorCode.NOT_FOUND, `run ${runId} was not registered within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
}
