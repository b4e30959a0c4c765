import { TrajectorySchema, type Trajectory } from '@sqlenv/protocol';
import { AppError, ErrorCode, formatZodIssues } from '@sqlenv/shared';
import type { BlobStore } from './blob-store.ts';

/** Blob key of an episode's trajectory: `<run>/traj/<episode id>`. */
export function trajectoryKey(runId: string, episodeId: string): string {
  return `${runId}/traj/${episodeId}`;
}

/** A trajectory's stored bytes (JSON). */
export function encodeTrajectory(trajectory: Trajectory): Buffer {
  return Buffer.from(JSON.stringify(trajectory));
}

/**
 * Trajectories stored once, keyed by episode id. A re-run of the same episode
 * (retry, stalled-job recovery) overwrites the same key, so the store never
 * holds two trajectories for one episode.
 */
export class TrajectoryStore {
  readonly #blobs: BlobStore;

  constructor(blobs: BlobStore) {
    this.#blobs = blobs;
  }

  async put(trajectory: Trajectory): Promise<string> {
    const key = trajectoryKey(trajectory.run_id, trajectory.episode_id);
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
}

function decodeTrajectory(key: string, bytes: Buffer | undefined): Trajectory {
  if (bytes === undefined) throw new AppError(ErrorCode.NOT_FOUND, `trajectory ${key} is not in the store`);
  const parsed = TrajectorySchema.safeParse(JSON.parse(bytes.toString('utf8')));
  if (!parsed.success) throw new AppError(ErrorCode.VALIDATION, `trajectory ${key}: ${formatZodIssues(parsed.error)}`);
  return parsed.data;
}
