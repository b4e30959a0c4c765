import type { Logger } from '@sqlenv/shared';
import { startStatusServer, transportHealthCheck, type RolloutMetrics, type StatusServer } from '@sqlenv/rollout';

/** The `--metrics-port` options every distributed app shares. */
export interface StatusEndpointOptions {
  metricsPort?: number | undefined;
  metricsHost: string;
  healthPingTimeoutMs: number;
  healthMaxLoopLagMs: number;
}

/** An app's `/metrics`, `/status` and `/healthz` endpoint, closed with its health check. */
export interface StatusEndpoint {
  readonly server: StatusServer;
  close(): Promise<void>;
}

/**
 * Start the status endpoint of a coordinator, worker or trainer when `--metrics-port` is set
 * (`undefined` otherwise): Prometheus metrics, the app's status as JSON, and a health check that
 * pings Redis and watches the event loop's lag.
 */
export async function startStatusEndpoint(
  transport: { ping(timeoutMs: number): Promise<void> },
  options: StatusEndpointOptions,
  metrics: RolloutMetrics,
  status: () => Promise<unknown> | unknown,
  logger: Logger,
): Promise<StatusEndpoint | undefined> {
  if (options.metricsPort === undefined) return undefined;
  const check = transportHealthCheck(transport, options);
  try {
    const server = await startStatusServer({ health: () => check.check(), port: options.metricsPort, host: options.metricsHost, registry: metrics.registry, status, logger });
    return {
      server,
      close: async () => {
        check.close();
        await server.close();
      },
    };
  } catch (error) {
    check.close();
    throw error;
  }
}
