import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import type { EngineStats } from '@sqlenv/model';

/** Prometheus metrics of one model server; its own registry, so several servers in one process never collide. */
export class ModelServerMetrics {
  readonly registry = new Registry();
  readonly requestsTotal = new Counter({
    name: 'sqlenv_model_server_requests_total',
    help: 'HTTP requests answered, by route and status',
    labelNames: ['route', 'status'] as const,
    registers: [this.registry],
  });
  readonly generatedTokensTotal = new Counter({
    name: 'sqlenv_model_server_generated_tokens_total',
    help: 'Completion tokens sampled, by served model',
    labelNames: ['model'] as const,
    registers: [this.registry],
  });
  readonly promptTokensTotal = new Counter({
    name: 'sqlenv_model_server_prompt_tokens_total',
    help: 'Prompt tokens received, by served model',
    labelNames: ['model'] as const,
    registers: [this.registry],
  });
  readonly requestsInFlight = new Gauge({
    name: 'sqlenv_model_server_requests_in_flight',
    help: 'Completion requests held by the server (running or waiting for their model)',
    registers: [this.registry],
  });
  readonly loadedAdapters = new Gauge({
    name: 'sqlenv_model_server_loaded_adapters',
    help: 'LoRA adapters loaded besides the base model',
    registers: [this.registry],
  });

  constructor(engineStats: () => EngineStats, options: { defaultMetrics?: boolean } = {}) {
    if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry, prefix: 'sqlenv_model_server_' });
    // Every engine counter as one labelled gauge, read at scrape time: the engine's own totals since start.
    new Gauge({
      name: 'sqlenv_model_server_engine_stat',
      help: 'Inference engine counters since start (EngineStats: turns, prefillTokens, reusedTokens, generatedTokens, ...), by stat',
      labelNames: ['stat'] as const,
      registers: [this.registry],
      collect() {
        for (const [stat, value] of Object.entries(engineStats())) if (typeof value === 'number') this.set({ stat }, value);
      },
    });
  }

  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
