import type { RolloutNotice } from '@sqlenv/protocol';
import { AppError, ErrorCode, toAppError, type Logger } from '@sqlenv/shared';
import type { RunRegistry, Transport } from './transport/transport.ts';

/** Applies a committed version's weights blob (null: the trainer published none yet). */
export type ApplyWeights = (blob: Buffer | null, version: number) => Promise<void>;

export interface WeightsFollowerOptions {
  /** How often `ensure` looks at the run's counters while it waits, in milliseconds. */
  pollMs: number;
  /** How long `ensure` waits for a version before failing the episode (it is retried), in milliseconds. */
  timeoutMs: number;
}

/**
 * Keeps a worker's policy at the trainer's newest committed version: on every
 * notice (and whenever an episode needs a newer version than it has) it reads
 * the committed weights blob (`counters.weightsKey`) and applies it. Loads run
 * one at a time and always take the newest version, so a burst of versions is
 * applied once. The inference engine swaps adapters between batches, never
 * inside one; each turn records the version that actually sampled it.
 */
export class WeightsFollower {
  readonly #transport: RunRegistry & Pick<Transport, 'blobs'>;
  readonly #runId: string;
  readonly #apply: ApplyWeights;
  readonly #logger: Logger;
  readonly #options: WeightsFollowerOptions;
  /** The version whose weights are applied (0: the initial adapter, applied at start). */
  #loaded = 0;
  #loading: Promise<void> = Promise.resolve();
  #closed = false;

  constructor(transport: RunRegistry & Pick<Transport, 'blobs'>, runId: string, apply: ApplyWeights, logger: Logger, options: WeightsFollowerOptions) {
    this.#transport = transport;
    this.#runId = runId;
    this.#apply = apply;
    this.#logger = logger.child({ component: 'weights-follower' });
    this.#options = options;
  }

  get loadedVersion(): number {
    return this.#loaded;
  }

  /** Load what is committed now (a worker joining a run mid-way). */
  start(): Promise<void> {
    return this.#refresh();
  }

  /** A trainer notice: load its version if it is newer (in the background). */
  onNotice(notice: RolloutNotice): void {
    if (notice.version <= this.#loaded || this.#closed) return;
    this.#refresh().catch((error: unknown) => {
      if (!this.#closed) this.#logger.error({ err: toAppError(error), version: notice.version }, 'could not load the new policy version');
    });
  }

  /**
   * Resolve once the applied version is at least `version` (an episode admitted
   * at version v must not be sampled with an older policy). Fails with TIMEOUT
   * after `timeoutMs`, so the episode is retried rather than stuck.
   */
  async ensure(version: number): Promise<void> {
    const deadline = performance.now() + this.#options.timeoutMs;
    while (this.#loaded < version) {
      if (this.#closed) throw new AppError(ErrorCode.ABORTED, 'worker left the run');
      await this.#refresh().catch((error: unknown) => this.#logger.warn({ err: toAppError(error), version }, 'loading a policy version failed; retrying'));
      if (this.#loaded >= version) return;
      if (performance.now() > deadline) throw new AppError(ErrorCode.TIMEOUT, `policy version ${version} was not loaded within ${this.#options.timeoutMs} ms (loaded: ${this.#loaded})`);
      await new Promise((resolve) => setTimeout(resolve, this.#options.pollMs));
    }
  }

  close(): void {
    this.#closed = true;
  }

  /** Read the committed version and apply it when newer; chained, so loads never overlap. */
  #refresh(): Promise<void> {
    const next = this.#loading.then(async () => {
      const counters = await this.#transport.counters(this.#runId);
      if (counters.policyVersion <= this.#loaded) return;
      let blob: Buffer | null = null;
      if (counters.weightsKey !== null) {
        blob = (await this.#transport.blobs.get(counters.weightsKey)) ?? null;
        if (blob === null) throw new AppError(ErrorCode.NOT_FOUND, `weights ${counters.weightsKey} of version ${counters.policyVersion} are missing from the blob store`);
      }
      // A worker leaving the run closes its engine: a version committed meanwhile is not applied.
      if (this.#closed) return;
      await this.#apply(blob, counters.policyVersion);
      this.#loaded = counters.policyVersion;
    });
    // A failed load must not wedge the chain for later ones.
    this.#loading = next.catch(() => undefined);
    return next;
  }
}
