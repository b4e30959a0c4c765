import { randomUUID } from 'node:crypto';
import { AppError, ErrorCode } from '@sqlenv/shared';
import type { ServedEnvironment, ServedRuntime } from './env-runtime.ts';
import { EnvSession, type SessionKind } from './env-session.ts';

/** Why a session ended without its client asking: an idle HTTP session reaped, an idle session evicted for room, shutdown. */
export type EndReason = 'idle' | 'evicted' | 'shutdown';

interface Entry {
  session: EnvSession;
  /** Called once when the registry ends the session (idle, eviction, shutdown). */
  onEnd: (reason: EndReason) => void;
}

export interface SessionRegistryOptions {
  runtime: ServedRuntime;
  maxSessions: number;
  /** Seconds without a request after which a session is idle (reaped, evictable); 0 = never. */
  idleTimeoutS: number;
  onCountChange?: (kind: SessionKind, delta: number) => void;
}

/**
 * All sessions of a server: capacity (WebSocket and HTTP sessions count
 * together), idle reaping, and eviction.
 *
 * A session is idle once no request has run on it for idleTimeoutS. Reaping
 * frees an idle session's episode without breaking its client: a WebSocket
 * session keeps its socket and slot and answers the next reset normally (RL
 * trainers keep a pool of connections across batches, evaluations and
 * checkpoints); an idle HTTP session, which has no socket to keep, ends.
 * When the server is full, the longest-idle session makes room for a new one;
 * a session that is not idle is never dropped: without an idle one, the new
 * session is refused (CAPACITY). With idleTimeoutS 0 nothing is ever idle.
 */
export class SessionRegistry {
  private readonly entries = new Map<string, Entry>();
  private readonly options: SessionRegistryOptions;
  private sweepTimer: NodeJS.Timeout | undefined;

  constructor(options: SessionRegistryOptions) {
    this.options = options;
    if (options.idleTimeoutS > 0) {
      // Sweep often enough that a session lives at most ~25% past its timeout, but never busier than 20/s.
      const sweepMs = Math.min(5000, Math.max(50, (options.idleTimeoutS * 1000) / 4));
      this.sweepTimer = setInterval(() => this.reapIdle(), sweepMs);
      this.sweepTimer.unref();
    }
  }

  get size(): number {
    return this.entries.size;
  }

  get maxSessions(): number {
    return this.options.maxSessions;
  }

  countOf(kind: SessionKind): number {
    let n = 0;
    for (const entry of this.entries.values()) if (entry.session.kind === kind) n += 1;
    return n;
  }

  get(id: string): EnvSession | undefined {
    return this.entries.get(id)?.session;
  }

  /**
   * Open a session with a fresh environment. Throws AppError CAPACITY when
   * full and no session is idle, or INTERNAL with the factory's error as cause
   * when the environment cannot be created.
   */
  open(kind: SessionKind, onEnd: (reason: EndReason) => void): EnvSession {
    if (this.entries.size >= this.options.maxSessions && !this.evictIdlest()) {
      throw new AppError(ErrorCode.CAPACITY, `Server at capacity: ${this.entries.size}/${this.options.maxSessions} sessions active, none idle`, {
        details: { active_sessions: this.entries.size, max_sessions: this.options.maxSessions },
      });
    }
    const session = new EnvSession(randomUUID(), kind, this.createEnvironment(), () => this.createEnvironment());
    this.entries.set(session.id, { session, onEnd });
    this.options.onCountChange?.(kind, 1);
    return session;
  }

  /** Remove a session and close its environment (client-initiated end). Idempotent. */
  remove(id: string): void {
    const entry = this.entries.get(id);
    if (entry === undefined) return;
    this.entries.delete(id);
    entry.session.close();
    this.options.onCountChange?.(entry.session.kind, -1);
  }

  /** Resolves when every session has finished the work queued on it so far. */
  async drainAll(): Promise<void> {
    await Promise.all([...this.entries.values()].map((e) => e.session.drained()));
  }

  /** End every session (server shutdown), telling each owner why. */
  endAll(reason: EndReason): void {
    for (const [id, entry] of [...this.entries]) this.end(id, entry, reason);
  }

  /** Stop the idle sweep; sessions are left to endAll(). */
  stop(): void {
    if (this.sweepTimer !== undefined) clearInterval(this.sweepTimer);
    this.sweepTimer = undefined;
  }

  private end(id: string, entry: Entry, reason: EndReason): void {
    // The owner is told first so it can send its final frame, then the env is closed.
    entry.onEnd(reason);
    this.remove(id);
  }

  private createEnvironment(): ServedEnvironment {
    try {
      return this.options.runtime.createEnvironment();
    } catch (cause) {
      throw new AppError(ErrorCode.INTERNAL, `Environment factory failed: ${cause instanceof Error ? cause.message : String(cause)}`, {
        cause,
        details: { stage: 'factory' },
      });
    }
  }

  /** Idle: nothing queued and no request for idleTimeoutS (a session waiting on a slow query is busy, whatever its timestamp). */
  private isIdle(session: EnvSession, cutoffMs: number): boolean {
    return this.options.idleTimeoutS > 0 && session.depth === 0 && session.lastActiveMs < cutoffMs;
  }

  private idleCutoffMs(): number {
    return performance.now() - this.options.idleTimeoutS * 1000;
  }

  private reapIdle(): void {
    const cutoffMs = this.idleCutoffMs();
    const because = `the session was idle for more than ${this.options.idleTimeoutS} s`;
    for (const [id, entry] of [...this.entries]) {
      if (!this.isIdle(entry.session, cutoffMs)) continue;
      if (entry.session.kind === 'http') this.end(id, entry, 'idle');
      else entry.session.release(because);
    }
  }

  /** End the session idle the longest, if any is idle; true when a slot was freed. */
  private evictIdlest(): boolean {
    const cutoffMs = this.idleCutoffMs();
    let oldest: [string, Entry] | undefined;
    for (const pair of this.entries) {
      const s = pair[1].session;
      if (!this.isIdle(s, cutoffMs)) continue;
      if (oldest === undefined || s.lastActiveMs < oldest[1].session.lastActiveMs) oldest = pair;
    }
    if (oldest === undefined) return false;
    this.end(oldest[0], oldest[1], 'evicted');
    return true;
  }
}
