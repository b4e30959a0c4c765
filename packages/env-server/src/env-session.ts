import { AppError, ErrorCode } from '@sqlenv/shared';
import type { ServedEnvironment } from './env-runtime.ts';

export type SessionKind = 'ws' | 'http';

/**
 * One session's environment and the requests queued on it. WebSocket and HTTP
 * sessions share this: requests run strictly in arrival order even though
 * step() is async, so a client may pipeline frames and still get replies in order.
 *
 * An idle session may lose its environment (release()) and keep its slot and
 * socket: the next reset creates a fresh environment, a step in between is an
 * EPISODE_STATE error saying why the episode is gone (never replayed silently).
 */
export class EnvSession {
  readonly id: string;
  readonly kind: SessionKind;
  /** performance.now() of the last request start or end; drives idle reaping and eviction. */
  lastActiveMs: number;
  private environment: ServedEnvironment | undefined;
  private readonly createEnvironment: () => ServedEnvironment;
  /** Why the environment was released, for the error of a later step. */
  private releasedBecause: string | undefined;
  private tail: Promise<void> = Promise.resolve();
  private queued = 0;
  private closed = false;

  constructor(id: string, kind: SessionKind, env: ServedEnvironment, createEnvironment: () => ServedEnvironment) {
    this.id = id;
    this.kind = kind;
    this.environment = env;
    this.createEnvironment = createEnvironment;
    this.lastActiveMs = performance.now();
  }

  /** The environment for a reset: a fresh one when it was released. */
  envForReset(): ServedEnvironment {
    this.assertOpen();
    this.releasedBecause = undefined;
    this.environment ??= this.createEnvironment();
    return this.environment;
  }

  /** The environment for a step; EPISODE_STATE when the episode was dropped by release(). */
  envForStep(): ServedEnvironment {
    if (this.environment !== undefined) return this.environment;
    throw new AppError(ErrorCode.EPISODE_STATE, `no episode: ${this.releasedBecause ?? 'the environment was released'}; reset to start a new one`);
  }

  /** The environment for state(): after a release, a fresh one (no episode: episode_id null). */
  envForState(): ServedEnvironment {
    this.assertOpen();
    this.environment ??= this.createEnvironment();
    return this.environment;
  }

  /** True while the session holds no environment (released and not reset since). */
  get isReleased(): boolean {
    return this.environment === undefined;
  }

  /** Drop the environment and its episode, keeping the session; `because` ends the message a later step gets. */
  release(because: string): void {
    if (this.environment === undefined) return;
    this.environment.close();
    this.environment = undefined;
    this.releasedBecause = because;
  }

  private assertOpen(): void {
    // A request still queued when the registry ended the session must not create an environment nobody closes.
    if (this.closed) throw new AppError(ErrorCode.EPISODE_STATE, 'session is closed');
  }

  /** Requests accepted and not yet finished (including the running one). */
  get depth(): number {
    return this.queued;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Run `task` after every earlier task of this session has settled. */
  enqueue<T>(task: () => Promise<T>): Promise<T> {
    this.queued += 1;
    const run = this.tail.then(async () => {
      this.lastActiveMs = performance.now();
      try {
        return await task();
      } finally {
        this.queued -= 1;
        this.lastActiveMs = performance.now();
      }
    });
    this.tail = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  /** Resolves once everything queued so far has settled. */
  drained(): Promise<void> {
    return this.tail;
  }

  /** Close the environment once; later calls do nothing. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.environment?.close();
    this.environment = undefined;
  }
}
