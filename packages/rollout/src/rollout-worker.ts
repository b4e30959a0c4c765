import type { Policy } from '@sqlenv/agents';
import type { EpisodeJob, EpisodeResult, RolloutRunSpec, SamplingSettings } from '@sqlenv/protocol';
import { silentLogger, toAppError, type Logger, maxOf, minOf } from '@sqlenv/shared';
import type { RolloutMetrics } from './metrics.ts';
import { playEpisode, type EnvironmentSource } from './play-episode.ts';
import type { Consumer, EpisodeAttempt, EpisodeEvent, Transport } from './transport/transport.ts';
import { WeightsFollower, type ApplyWeights } from './weights-follower.ts';

/** What a worker needs to play a run's episodes. */
export interface RunResources {
  policy: Policy;
  environments: EnvironmentSource;
  /**
   * Policies with weights (the model policy): applies a committed version's weights blob.
   * With it, the worker follows the trainer's versions (WeightsFollower) and never plays an
   * episode with an older policy than the one it was admitted at.
   */
  applyWeights?: ApplyWeights;
  /** How the policy samples, recorded in every trajectory (null / absent for text policies). */
  sampling?: SamplingSettings | null;
  /** Called when the worker leaves the run. */
  release?(): Promise<void>;
}

/** Builds the policy and environment source for a run (the command layer knows sql-env and agents). */
export type ResolveRun = (spec: RolloutRunSpec) => Promise<RunResources>;

export interface RolloutWorkerOptions {
  transport: Transport;
  resolveRun: ResolveRun;
  /** Episodes in flight at once per run. */
  concurrency: number;
  /** Serve only this run; without it the worker serves every active run it finds. */
  runId?: string;
  /** Recorded in trajectories. */
  workerId: string;
  /** How often to look for new or finished runs, in milliseconds. */
  discoveryMs: number;
  /** How long an episode waits for its admitted policy version to load before failing (retried), in milliseconds. Default 120,000. */
  versionWaitMs?: number;
  logger?: Logger;
  metrics?: RolloutMetrics;
}

interface Attached {
  consumer: Consumer;
  resources: RunResources;
  unsubscribe: () => Promise<void>;
  weights: WeightsFollower | undefined;
}

interface VersionState {
  /** Newest policy version announced by the trainer; read at each turn boundary. */
  version: number;
  /** Loads committed weights for policies that have them. */
  weights: WeightsFollower | undefined;
}

/**
 * A rollout worker process: plays episode jobs of one or all active runs,
 * `concurrency` at a time per run. Stateless between episodes, so workers can
 * come and go mid-run; `close()` finishes the episodes in flight (a killed
 * worker's episodes come back through the transport's stalled-job recovery).
 */
export class RolloutWorker {
  readonly #options: RolloutWorkerOptions;
  readonly #logger: Logger;
  readonly #runs = new Map<string, Attached>();
  readonly #attaching = new Map<string, Promise<void>>();
  #timer: NodeJS.Timeout | undefined;
  #closing: Promise<void> | undefined;
  #episodesPlayed = 0;

  constructor(options: RolloutWorkerOptions) {
    this.#options = options;
    this.#logger = (options.logger ?? silentLogger).child({ component: 'worker', workerId: options.workerId });
  }

  get runs(): string[] {
    return [...this.#runs.keys()];
  }

  get episodesPlayed(): number {
    return this.#episodesPlayed;
  }

  /** Attach to the run(s) now, then keep looking every `discoveryMs`. */
  async start(): Promise<void> {
    await this.#discover();
    const tick = (): void => {
      this.#timer = setTimeout(() => {
        this.#discover()
          .catch((error: unknown) => {
            // A discovery caught by shutdown fails on the closing connection: not worth a warning.
            if (!this.#closing) this.#logger.warn({ err: toAppError(error) }, 'run discovery failed');
          })
          .finally(() => {
            if (!this.#closing) tick();
          });
      }, this.#options.discoveryMs);
    };
    tick();
  }

  async #discover(): Promise<void> {
    const { transport, runId } = this.#options;
    const active = runId !== undefined ? ((await transport.activeRuns()).includes(runId) ? [runId] : []) : await transport.activeRuns();
    for (const id of active) {
      if (!this.#runs.has(id) && !this.#attaching.has(id) && !this.#closing) {
        const attaching = this.#attach(id).finally(() => this.#attaching.delete(id));
        this.#attaching.set(id, attaching);
        await attaching;
      }
    }
    for (const id of this.#runs.keys()) if (!active.includes(id)) await this.#detach(id);
  }

  async #attach(runId: string): Promise<void> {
    const { transport } = this.#options;
    const spec = await transport.getRun(runId);
    if (!spec) return;
    const logger = this.#logger.child({ runId });
    const resources = await this.#options.resolveRun(spec);
    const weights =
      resources.applyWeights === undefined
        ? undefined
        : new WeightsFollower(transport, runId, resources.applyWeights, logger, { pollMs: Math.min(250, this.#options.discoveryMs), timeoutMs: this.#options.versionWaitMs ?? 120_000 });
    const state: VersionState = { version: (await transport.counters(runId)).policyVersion, weights };
    const unsubscribe = await transport.subscribe(runId, (notice) => {
      // Versions only move forward; a late notice never rolls one back.
      if (notice.version > state.version) {
        state.version = notice.version;
        logger.debug({ version: notice.version }, 'policy version picked up');
      }
      weights?.onNotice(notice);
      if (notice.kind === 'done') void this.#detach(runId);
    });
    try {
      await weights?.start();
    } catch (error) {
      // Not fatal: episodes wait for their version (ensure) and retry the load.
      logger.warn({ err: toAppError(error) }, 'could not load the committed policy version yet');
    }
    const consumer = transport.consumeEpisodes(runId, (job, attempt) => this.#play(spec, resources, state, job, attempt, logger), {
      concurrency: this.#options.concurrency,
      consumerName: this.#options.workerId,
      onEvent: (event) => this.#onEvent(runId, event, logger),
    });
    this.#runs.set(runId, { consumer, resources, unsubscribe, weights });
    logger.info({ concurrency: this.#options.concurrency, policy: spec.policy, dataset: spec.dataset, version: state.version }, 'worker attached to run');
  }

  async #play(spec: RolloutRunSpec, resources: RunResources, state: VersionState, job: EpisodeJob, attempt: EpisodeAttempt, logger: Logger): Promise<EpisodeResult> {
    const episodeLogger = logger.child({ groupId: job.group_id, episodeId: job.episode_id });
    episodeLogger.debug({ attempt: attempt.attempt, queueWaitMs: attempt.queueWaitMs }, 'episode started');
    // Never sample with an older policy than the one the group was admitted at (versions only grow, so once is enough).
    await state.weights?.ensure(job.admitted_version);
    const trajectory = await playEpisode(job, attempt, {
      environments: resources.environments,
      policy: resources.policy,
      currentVersion: () => state.version,
      workerId: this.#options.workerId,
      maxTurns: spec.max_turns,
      sampling: resources.sampling ?? null,
    });
    const { transport, metrics } = this.#options;
    const key = await transport.storeTrajectory(trajectory, job, attempt.fence);
    this.#episodesPlayed += 1;
    const versions = trajectory.turns.map((t) => t.policy_version);
    metrics?.episodeSeconds.observe({ run: spec.run_id }, trajectory.timings.total_ms / 1000);
    metrics?.queueWaitSeconds.observe({ run: spec.run_id }, trajectory.timings.queue_wait_ms / 1000);
    metrics?.episodeReward.observe({ run: spec.run_id }, trajectory.outcome.total_reward);
    episodeLogger.debug({ reward: trajectory.outcome.total_reward, correct: trajectory.outcome.correct, steps: trajectory.outcome.steps }, 'episode finished');
    return {
      episode_id: job.episode_id,
      index: job.index,
      trajectory_key: key,
      reward: trajectory.outcome.total_reward,
      correct: trajectory.outcome.correct,
      steps: trajectory.outcome.steps,
      attempt: attempt.attempt,
      min_policy_version: minOf(versions, job.admitted_version),
      max_policy_version: maxOf(versions, job.admitted_version),
    };
  }

  #onEvent(runId: string, event: EpisodeEvent, logger: Logger): void {
    const metrics = this.#options.metrics;
    if (event.type === 'completed') {
      metrics?.episodesCompleted.inc({ run: runId });
      return;
    }
    if (event.final) {
      metrics?.episodesFailed.inc({ run: runId });
      logger.warn({ jobId: event.jobId, groupId: event.job?.group_id, attempt: event.attempt, reason: event.reason }, 'episode failed for good');
    } else {
      metrics?.episodeRetries.inc({ run: runId });
      logger.info({ jobId: event.jobId, attempt: event.attempt, reason: event.reason }, 'episode failed; will retry');
    }
  }

  async #detach(runId: string): Promise<void> {
    const attached = this.#runs.get(runId);
    if (!attached) return;
    this.#runs.delete(runId);
    attached.weights?.close();
    await attached.consumer.close();
    await attached.unsubscribe();
    await attached.resources.release?.();
    this.#logger.info({ runId }, 'worker left run');
  }

  /** Finish in-flight episodes and leave every run. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      if (this.#timer) clearTimeout(this.#timer);
      await Promise.allSettled([...this.#attaching.values()]);
      await Promise.all([...this.#runs.keys()].map((id) => this.#detach(id)));
    })();
    return this.#closing;
  }
}
