import { TrajectorySchema, type Trajectory } from '@sqlenv/protocol';
import { AppError, ErrorCode, formatZodIssues } from '@sqlenv/shared';
import type { BlobStore } from './blob-store.ts';

/**
 * Blob key of one attempt's trajectory: `<run>/traj/<episode id>/<fence>`. The fence (the job's lock
 * token) makes every take of the job write its own key, so a worker that lost its lock and resumed
 * never overwrites the attempt BullMQ accepted; the accepted attempt's key is the job's result.
 */
export function trajectoryKey(runId: string, episodeId: string, fence: string): string {
  return `${runId}/traj/${episodeId}/${fence.replace(/[^A-Za-z0-9._-]/g, '_')}`;
}

/** A trajectory's stored bytes (JSON). */
export function encodeTrajectory(trajectory: Trajectory): Buffer {
  return Buffer.from(JSON.stringify(trajectory));
}

/**
 * Trajectories by attempt key (trajectoryKey). The transports store them (storeTrajectory, with the
 * episode's completion); this reads them back and deletes them once trained.
 */
export class TrajectoryStore {
  readonly #blobs: BlobStore;

  constructor(blobs: BlobStore) {
    this.#blobs = blobs;
  }

  async put(trajectory: Trajectory, fence: string): Promise<string> {
    const key = trajectoryKey(trajectory.run_id, trajectory.episode_id, fence);
    await this.#blobs.put(key, encodeTrajectory(trajectory));
    return key;
  }

  async get(key: string): Promise<Trajectory> {
    return decodeTrajectory(key, await this.#blobs.get(key));
  }

  /** Several trajectories in one read (the trainer's batch), in key order. */
  async getMany(keys: readonly string[]): Promise<Trajectory[]> {
    const blobs = await this.#blobs.getMany(keys);
    return keys.map((key, i) => decodeTrajectory(key, blobs[i]));
  }

  delete(key: string): Promise<void> {
    return this.#blobs.delete(key);
  }

  deleteMany(keys: readonly string[]): Promise<void> {
    return this.#blobs.deleteMany(keys);
  }
}

function decodeTrajectory(key: string, bytes: Buffer | undefined): Trajectory {
  if (bytes === undefined) throw new AppError(ErrorCode.NOT_FOUND, `trajectory ${key} is not in the store`);
  const parsed = TrajectorySchema.safeParse(JSON.parse(bytes.toString('utf8')));
  if (!parsed.success) throw new AppError(ErrorCode.VALIDATION, `trajectory ${key}: ${formatZodIssues(parsed.error)}`);
  return parsed.data;
}
