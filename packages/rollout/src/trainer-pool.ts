import { silentLogger, toAppError, type Logger } from '@sqlenv/shared';
import { Wakeup } from './wakeup.ts';

/** The trainer lease of a run: one trainer trains a run at a time. */
export interface TrainerLeases {
  /** Take (or renew) the lease for `ttlMs`; false when another trainer holds it. */
  acquireTrainerLease(runId: string, owner: string, ttlMs: number): Promise<boolean>;
  releaseTrainerLease(runId: string, owner: string): Promise<void>;
  /** Runs registered and not done. */
  activeRuns(): Promise<string[]>;
}

export interface TrainerPoolOptions {
  leases: TrainerLeases;
  /** This trainer's name in the lease (unique per process). */
  owner: string;
  /** Lease time to live, in milliseconds; renewed every third of it while training. */
  leaseMs: number;
  /** How often to look for a run to train while idle, in milliseconds. */
  pollMs: number;
  /** Train only this run (the lease still keeps a second trainer off it); otherwise any active run. */
  runId?: string;
  /** Train one run to its end (or until `signal` aborts). */
  train: (runId: string, signal: AbortSignal) => Promise<unknown>;
  logger?: Logger;
  signal?: AbortSignal;
}

/**
 * A trainer process that serves runs: it takes the lease of an active run that no other trainer
 * holds, trains that run to the end, and takes the next. With K trainers, K runs train at once
 * (`docker compose up --scale trainer=K`); a trainer that dies loses its lease after `leaseMs` and
 * another one (or its own restart) continues the run from the last commit. The lease only assigns
 * work: correctness comes from the commit's version check, so a paused trainer that lost its lease
 * and resumes cannot commit over its successor.
 */
export async function serveRuns(options: TrainerPoolOptions): Promise<void> {
  const { leases, owner, leaseMs } = options;
  const logger = (options.logger ?? silentLogger).child({ component: 'trainer-pool', owner });
  const wakeup = new Wakeup();
  const onAbort = (): void => wakeup.wake();
  options.signal?.addEventListener('abort', onAbort);
  try {
    while (!options.signal?.aborted) {
      const candidates = options.runId !== undefined ? [options.runId] : await leases.activeRuns();
      let claimed: string | undefined;
      for (const runId of candidates) {
        if (await leases.acquireTrainerLease(runId, owner, leaseMs)) {
          claimed = runId;
          break;
        }
      }
      if (claimed === undefined) {
        await wakeup.wait(options.pollMs);
        continue;
      }
      await trainUnderLease(claimed, options, logger);
      if (options.runId !== undefined) return;
    }
  } finally {
    options.signal?.removeEventListener('abort', onAbort);
  }
}

async function trainUnderLease(runId: string, options: TrainerPoolOptions, logger: Logger): Promise<void> {
  const { leases, owner, leaseMs } = options;
  const stop = new AbortController();
  const onAbort = (): void => stop.abort();
  options.signal?.addEventListener('abort', onAbort);
  // Renew while training; a renewal that finds the lease gone (we were paused past its TTL and another
  // trainer took the run) stops this one: the other trainer owns the run now.
  const renew = setInterval(() => {
    leases.acquireTrainerLease(runId, owner, leaseMs).then(
      (held) => {
        if (!held && !stop.signal.aborted) {
          logger.warn({ runId }, 'trainer lease lost to another trainer; stopping this run here');
          stop.abort();
        }
      },
      (error: unknown) => logger.warn({ runId, err: toAppError(error).message }, 'trainer lease renewal failed'),
    );
  }, Math.max(100, Math.floor(leaseMs / 3)));
  logger.info({ runId, leaseMs }, 'training run');
  try {
    await options.train(runId, stop.signal);
  } finally {
    clearInterval(renew);
    options.signal?.removeEventListener('abort', onAbort);
    await leases.releaseTrainerLease(runId, owner).catch(() => undefined);
  }
}
