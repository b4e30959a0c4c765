import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * Prometheus metrics of one server instance. Each server owns its registry
 * (no global default registry), so several servers in one process (tests,
 * benchmarks) never collide.
 */
export class ServerMetrics {
  readonly registry = new Registry();
  readonly sessionsActive = new Gauge({
    name: 'sqlenv_server_sessions_active',
    help: 'Sessions currently open, by transport',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  readonly stepsTotal = new Counter({
    name: 'sqlenv_server_steps_total',
    help: 'Environment steps served',
    labelNames: ['transport'] as const,
    registers: [this.registry],
  });
  readonly resetsTotal = new Counter({
    name: 'sqlenv_server_resets_total',
    help: 'Episode resets served',
    labelNames: ['transport'] as const,
    registers: [this.registry],
  });
  readonly stepSeconds = new Histogram({
    name: 'sqlenv_server_step_duration_seconds',
    help: 'Time from a step request being dequeued to its reply, in seconds',
    labelNames: ['transport'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  readonly errorsTotal = new Counter({
    name: 'sqlenv_server_errors_total',
    help: 'Error replies sent, by OpenEnv error code (or HTTP status class)',
    labelNames: ['code'] as const,
    registers: [this.registry],
  });

  constructor(options: { defaultMetrics?: boolean } = {}) {
    // Process metrics (RSS, event-loop lag) make the dashboard useful on their own.
    if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry, prefix: 'sqlenv_server_' });
    for (const kind of ['ws', 'http'] as const) this.sessionsActive.set({ kind }, 0);
  }

  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
