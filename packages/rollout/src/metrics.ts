import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { RunCounters } from './transport/transport.ts';

/**
 * Prometheus metrics of one app (coordinator, worker, trainer, or all three in
 * `sqlenv train`). Each app owns a Registry (never the global one) so several
 * can live in one process and tests stay independent.
 */
export class RolloutMetrics {
  readonly registry = new Registry();
  readonly episodesCompleted = new Counter({ name: 'sqlenv_episodes_completed_total', help: 'Episodes played to the end on this worker', labelNames: ['run'], registers: [this.registry] });
  readonly episodesFailed = new Counter({ name: 'sqlenv_episodes_failed_total', help: 'Episode attempts that failed for good (out of attempts or malformed)', labelNames: ['run'], registers: [this.registry] });
  readonly episodeRetries = new Counter({ name: 'sqlenv_episode_retries_total', help: 'Episode attempts that failed and will be retried', labelNames: ['run'], registers: [this.registry] });
  readonly episodeSeconds = new Histogram({
    name: 'sqlenv_episode_duration_seconds',
    help: 'Wall time of an episode on a worker',
    labelNames: ['run'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [this.registry],
  });
  readonly queueWaitSeconds = new Histogram({
    name: 'sqlenv_episode_queue_wait_seconds',
    help: 'Time from enqueue to the start of the attempt',
    labelNames: ['run'],
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120],
    registers: [this.registry],
  });
  readonly episodeReward = new Histogram({
    name: 'sqlenv_episode_reward',
    help: 'Total reward of finished episodes',
    labelNames: ['run'],
    buckets: [-1, -0.5, -0.25, 0, 0.1, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 2],
    registers: [this.registry],
  });
  readonly staleness = new Histogram({
    name: 'sqlenv_batch_staleness_versions',
    help: 'Trainer version minus the oldest policy version sampled in a trained batch',
    labelNames: ['run'],
    buckets: [0, 1, 2, 3, 4, 8, 16],
    registers: [this.registry],
  });
  readonly groups = new Gauge({ name: 'sqlenv_run_groups', help: 'Groups of a run by state (cumulative, read from the transport)', labelNames: ['run', 'state'], registers: [this.registry] });
  readonly episodes = new Gauge({ name: 'sqlenv_run_episodes', help: 'Episodes of a run by state (cumulative, read from the transport)', labelNames: ['run', 'state'], registers: [this.registry] });
  readonly queueDepth = new Gauge({ name: 'sqlenv_queue_depth', help: 'Episode jobs by queue state', labelNames: ['run', 'state'], registers: [this.registry] });
  readonly policyVersion = new Gauge({ name: 'sqlenv_policy_version', help: 'Committed policy version', labelNames: ['run'], registers: [this.registry] });
  readonly trainerWaitSeconds = new Counter({ name: 'sqlenv_trainer_wait_seconds_total', help: 'Time the trainer spent waiting for scored groups', labelNames: ['run'], registers: [this.registry] });
  readonly trainerUpdateSeconds = new Counter({ name: 'sqlenv_trainer_update_seconds_total', help: 'Time the trainer spent in policy updates', labelNames: ['run'], registers: [this.registry] });

  constructor(options: { processMetrics?: boolean } = {}) {
    if (options.processMetrics) collectDefaultMetrics({ register: this.registry });
  }

  /** Mirror a run's transport counters (cumulative in Redis, so right after any restart). */
  observeCounters(runId: string, counters: RunCounters): void {
    this.groups.set({ run: runId, state: 'admitted' }, counters.admittedGroups);
    this.groups.set({ run: runId, state: 'failed' }, counters.failedGroups);
    this.groups.set({ run: runId, state: 'scored' }, counters.scoredPending);
    this.groups.set({ run: runId, state: 'trained' }, counters.trainedGroups);
    this.groups.set({ run: runId, state: 'dropped' }, counters.droppedGroups);
    this.episodes.set({ run: runId, state: 'completed' }, counters.completedEpisodes);
    this.episodes.set({ run: runId, state: 'failed' }, counters.failedEpisodes);
    this.episodes.set({ run: runId, state: 'consumed' }, counters.consumedEpisodes);
    this.episodes.set({ run: runId, state: 'duplicate' }, counters.duplicateTrajectories);
    this.policyVersion.set({ run: runId }, counters.policyVersion);
  }
}
