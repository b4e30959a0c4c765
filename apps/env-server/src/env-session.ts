import type { ServedEnvironment } from './env-runtime.ts';

export type SessionKind = 'ws' | 'http';

/**
 * One environment and the requests queued on it. WebSocket and HTTP sessions
 * share this: requests run strictly in arrival order even though step() is
 * async, so a client may pipeline frames and still get replies in order.
 */
export class EnvSession {
  readonly id: string;
  readonly kind: SessionKind;
  readonly env: ServedEnvironment;
  /** performance.now() of the last request start or end; drives idle reaping and HTTP eviction. */
  lastActiveMs: number;
  private tail: Promise<void> = Promise.resolve();
  private queued = 0;
  private closed = false;

  constructor(id: string, kind: SessionKind, env: ServedEnvironment) {
    this.id = id;
    this.kind = kind;
    this.env = env;
    this.lastActiveMs = performance.now();
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
    this.env.close();
  }
}
