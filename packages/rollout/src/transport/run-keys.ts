import type { FlowJob } from 'bullmq';
import type { ChainableCommander } from 'ioredis';
import { parseRunId, type EpisodeJob, type GroupJob, type RolloutRunSpec } from '@sqlenv/protocol';
import { AppError, ErrorCode } from '@sqlenv/shared';

/** Queue names inside a run's prefix. */
export const EPISODES = 'episodes';
export const GROUPS = 'groups';

/**
 * A literal string as a Redis glob pattern (SCAN/KEYS MATCH) that matches only itself: every
 * character the matcher treats specially gets a backslash. Redis reads `\x` as a literal x for any
 * x, so escaping more than needed is harmless, escaping less lets `*` in a name match other keys.
 */
export function redisGlobLiteral(text: string): string {
  return text.replace(/[\\*?[\]^-]/g, '\\$&');
}

/** Redis keys of one run; all in the run's hash slot. */
export class RunKeys {
  readonly prefix: string;
  /** `runId` is checked here too: no key of any run is derived from an id that is not one. */
  constructor(keyBase: string, runId: string) {
    this.prefix = `${keyBase}:{${parseRunId(runId, 'run id')}}`;
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
  /** Bitmap by group seq: groups the trainer consumed (1 bit per group: stays small however long the run). */
  get consumedGroups(): string {
    return `${this.prefix}:consumed-groups`;
  }
  /** Bitmap by episode slot (seq × G + index): episodes whose trajectory was stored. */
  get completedEpisodes(): string {
    return `${this.prefix}:completed-episodes`;
  }
  /** Bitmap by episode slot, from the trajectories the trainer trained on (the duplicate check). */
  get trainedEpisodes(): string {
    return `${this.prefix}:trained-episodes`;
  }
  /** Hash group seq → the blob keys of every trajectory attempt stored for it ('\n'-separated). */
  get attempts(): string {
    return `${this.prefix}:attempts`;
  }
  /** List of blob keys to delete: trajectories of consumed groups (drained by the trainer). */
  get trash(): string {
    return `${this.prefix}:trash`;
  }
  /** Sorted set version → committed weights blob key (the source of truth for weight retention). */
  get weights(): string {
    return `${this.prefix}:weights`;
  }
  /** Hash checkpoint name → weights blob key: pinned, never pruned. */
  get checkpoints(): string {
    return `${this.prefix}:checkpoints`;
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
  /** Which trainer serves the run (a lease with a TTL, renewed while it trains). */
  get trainerLease(): string {
    return `${this.prefix}:trainer-lease`;
  }
  /** SCAN pattern of every key of the run (`runs show/delete`, expiry): the prefix as a literal, then `*`. */
  get pattern(): string {
    return `${redisGlobLiteral(this.prefix)}:*`;
  }
}

/** Bit of an episode in the run's episode bitmaps: its group's seq × G + its index in the group. */
export function episodeSlot(groupSeq: number, groupSize: number, index: number): number {
  return groupSeq * groupSize + index;
}

/** The BullMQ flow of one group: the parent job on `groups`, its G episode jobs on `episodes`. */
export function groupFlow(spec: RolloutRunSpec, keys: RunKeys, group: GroupJob, episodes: readonly EpisodeJob[], keep: { keepCompletedEpisodes: number; keepCompletedGroups: number }): FlowJob {
  return {
    name: 'group',
    queueName: GROUPS,
    prefix: keys.prefix,
    data: group,
    // Failed group jobs are kept (the record of a failure and its reason); completed ones only up to a
    // count: a scored group lives on in the scored buffer, and a consumed one in the consumed bitmap.
    opts: { jobId: group.group_id, removeOnComplete: { count: keep.keepCompletedGroups }, removeOnFail: false, attempts: 3, backoff: { type: 'exponential', delay: 500 } },
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
        removeOnComplete: { count: keep.keepCompletedEpisodes },
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
