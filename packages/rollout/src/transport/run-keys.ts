import type { FlowJob } from 'bullmq';
import type { ChainableCommander } from 'ioredis';
import type { EpisodeJob, GroupJob, RolloutRunSpec } from '@sqlenv/protocol';
import { AppError, ErrorCode } from '@sqlenv/shared';

/** Queue names inside a run's prefix. */
export const EPISODES = 'episodes';
export const GROUPS = 'groups';

/** Redis keys of one run; all in the run's hash slot. */
export class RunKeys {
  readonly prefix: string;
  constructor(keyBase: string, runId: string) {
    this.prefix = `${keyBase}:{${runId}}`;
  }
  get spec(): string {
    return `${this.prefix}:spec`;
  }
  get state(): string {
    return `${this.prefix}:state`;
  }
  get scored(): string {
    return `${this.prefix}:scored`;
  }
  get scoredData(): string {
    return `${this.prefix}:scored-data`;
  }
  get consumed(): string {
    return `${this.prefix}:consumed`;
  }
  get consumedEpisodes(): string {
    return `${this.prefix}:consumed-episodes`;
  }
  get completedEpisodes(): string {
    return `${this.prefix}:completed-episodes`;
  }
  get batches(): string {
    return `${this.prefix}:batches`;
  }
  get notices(): string {
    return `${this.prefix}:notices`;
  }
  queueKey(queue: string, suffix: string): string {
    return `${this.prefix}:${queue}:${suffix}`;
  }
  blob(rest: string): string {
    return `${this.prefix}:blob:${rest}`;
  }
}

/** The BullMQ flow of one group: the parent job on `groups`, its G episode jobs on `episodes`. */
export function groupFlow(spec: RolloutRunSpec, keys: RunKeys, group: GroupJob, episodes: readonly EpisodeJob[], keepCompletedEpisodes: number): FlowJob {
  return {
    name: 'group',
    queueName: GROUPS,
    prefix: keys.prefix,
    data: group,
    // Group jobs are kept: they are the record of the flow (and of its failure reason).
    opts: { jobId: group.group_id, removeOnComplete: false, removeOnFail: false, attempts: 3, backoff: { type: 'exponential', delay: 500 } },
    children: episodes.map((episode) => ({
      name: 'episode',
      queueName: EPISODES,
      prefix: keys.prefix,
      data: episode,
      opts: {
        jobId: episode.episode_id,
        attempts: spec.attempts,
        backoff: { type: 'exponential', delay: spec.backoff_ms },
        failParentOnFailure: true,
        removeOnComplete: { count: keepCompletedEpisodes },
        removeOnFail: false,
      },
    })),
  };
}

/** Run a pipeline or MULTI and return its replies, turning a per-command error into an AppError. */
export async function execBatch(batch: ChainableCommander, what: string): Promise<unknown[]> {
  const results = await batch.exec();
  if (results === null) throw new AppError(ErrorCode.TRANSPORT, `${what}: transaction aborted`);
  return results.map(([error, value]) => {
    if (error) throw new AppError(ErrorCode.TRANSPORT, `${what}: ${error.message}`, { cause: error });
    return value;
  });
}
