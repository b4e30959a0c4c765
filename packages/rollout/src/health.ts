/** What `/healthz` answers: 200 with this JSON when `ok`, 503 otherwise. */
export interface HealthReport {
  ok: boolean;
  redis: 'ok' | 'unreachable';
  /** Round trip of the PING, in milliseconds (null when Redis is unreachable). */
  redisMs: number | null;
  /** Longest event-loop stall since the previous check, in milliseconds. */
  loopLagMaxMs: number;
  /** Why it is not ok (absent when ok). */
  reason?: string;
}

/** Heartbeat period of the event-loop stall detector, in milliseconds. */
const HEARTBEAT_MS = 100;

export interface HealthCheckOptions {
  /** Resolves when Redis answered a PING (the transport's `ping`). */
  ping: (timeoutMs: number) => Promise<void>;
  /** A PING slower than this counts as Redis unreachable, in milliseconds. */
  pingTimeoutMs: number;
  /**
   * An event-loop stall longer than this since the previous check makes the process unhealthy, in
   * milliseconds. A stalled loop stops renewing BullMQ job locks (30 s by default), so a worker
   * whose loop stalls for many seconds is losing its jobs to others.
   */
  maxLoopLagMs: number;
}

export interface HealthCheck {
  check(): Promise<HealthReport>;
  /** Stop the event-loop monitor. Idempotent. */
  close(): void;
}

/**
 * The meaning behind `/healthz`: the process can reach Redis (every piece of a run's state lives
 * there, so a process that cannot reach it is doing nothing useful) and its event loop turns. A
 * loop blocked at the moment of the check cannot answer at all, and the orchestrator's probe times
 * out; a loop that was blocked since the last check shows in `loopLagMaxMs`.
 */
export function createHealthCheck(options: HealthCheckOptions): HealthCheck {
  // A heartbeat timer: how late each tick fires is how long the loop was stalled. (perf_hooks'
  // monitorEventLoopDelay drops the first interval after a reset, so a stall right after one check
  // would not show at the next.)
  let last = performance.now();
  let maxLagMs = 0;
  const heartbeat = setInterval(() => {
    const now = performance.now();
    maxLagMs = Math.max(maxLagMs, now - last - HEARTBEAT_MS);
    last = now;
  }, HEARTBEAT_MS);
  heartbeat.unref();
  return {
    async check(): Promise<HealthReport> {
      // A stall still going on when this check runs counts too (its tick has not fired yet).
      const loopLagMaxMs = Math.max(0, Math.round(Math.max(maxLagMs, performance.now() - last - HEARTBEAT_MS)));
      maxLagMs = 0;
      const started = performance.now();
      let redisMs: number | null = null;
      let redisError: string | undefined;
      try {
        await options.ping(options.pingTimeoutMs);
        redisMs = Math.round((performance.now() - started) * 10) / 10;
      } catch (error) {
        redisError = error instanceof Error ? error.message : String(error);
      }
      const reasons: string[] = [];
      if (redisError !== undefined) reasons.push(`redis unreachable: ${redisError}`);
      if (loopLagMaxMs > options.maxLoopLagMs) reasons.push(`event loop stalled for ${loopLagMaxMs} ms (limit ${options.maxLoopLagMs} ms)`);
      return {
        ok: reasons.length === 0,
        redis: redisError === undefined ? 'ok' : 'unreachable',
        redisMs,
        loopLagMaxMs,
        ...(reasons.length > 0 ? { reason: reasons.join('; ') } : {}),
      };
    },
    close(): void {
      clearInterval(heartbeat);
    },
  };
}

/** The health check of an app on the BullMQ transport, with the limits from its options. */
export function transportHealthCheck(transport: { ping(timeoutMs: number): Promise<void> }, options: { healthPingTimeoutMs: number; healthMaxLoopLagMs: number }): HealthCheck {
  return createHealthCheck({ ping: (timeoutMs) => transport.ping(timeoutMs), pingTimeoutMs: options.healthPingTimeoutMs, maxLoopLagMs: options.healthMaxLoopLagMs });
}
