import { fastSqlAction, SqlActionSchema, type EpisodeState, type ResetOptions, type SqlAction, type StepResult } from '@sqlenv/protocol';
import type { Logger } from '@sqlenv/shared';
import type { Catalog } from './catalog.ts';
import type { ServedEnvironment } from './env-runtime.ts';
import { toValidationIssues, validationError } from './error-mapping.ts';
import type { ServerMetrics } from './server-metrics.ts';

export type Transport = 'ws' | 'http';

/**
 * reset / step / state on one environment, shared by the WebSocket and HTTP
 * paths: input validation against the zod schemas and the catalog, metrics,
 * and the wire shape (observation, reward, done — never `info`).
 */
export class EnvActions {
  private readonly catalog: Catalog;
  private readonly metrics: ServerMetrics;

  constructor(catalog: Catalog, metrics: ServerMetrics) {
    this.catalog = catalog;
    this.metrics = metrics;
  }

  /** Validate reset kwargs without touching an environment (ids must be in the catalog). */
  parseResetOptions(raw: Record<string, unknown>, locPrefix: readonly string[]): ResetOptions {
    return this.catalog.parseResetOptions(raw, locPrefix);
  }

  /** `locPrefix` places validation issues (`['data']` on WS, `['body']` over HTTP). */
  async reset(env: ServedEnvironment, raw: Record<string, unknown>, transport: Transport, locPrefix: readonly string[]): Promise<StepResult> {
    const options = this.catalog.parseResetOptions(raw, locPrefix);
    const result = await env.reset(options);
    this.metrics.resetsTotal.inc({ transport });
    return toWire(result);
  }

  /** Validate the action (strict: unknown fields are errors), then step. */
  parseAction(raw: unknown, locPrefix: readonly string[]): SqlAction {
    const fast = fastSqlAction(raw);
    if (fast !== undefined) return fast;
    const parsed = SqlActionSchema.safeParse(raw);
    if (!parsed.success) throw validationError('Invalid action', toValidationIssues(parsed.error, locPrefix));
    return parsed.data;
  }

  /** `log` (the session's logger) gets the step's reward breakdown at debug level: in eval mode the only place the shaping shows. */
  async step(env: ServedEnvironment, raw: unknown, transport: Transport, locPrefix: readonly string[], log?: Logger): Promise<StepResult> {
    const action = this.parseAction(raw, locPrefix);
    const stopTimer = this.metrics.stepSeconds.startTimer({ transport });
    try {
      const result = await env.step(action);
      this.metrics.stepsTotal.inc({ transport });
      if (log !== undefined && result.info?.reward_breakdown !== undefined && log.isLevelEnabled('debug')) {
        log.debug({ actionType: action.action_type, reward: result.reward, done: result.done, rewardBreakdown: result.info.reward_breakdown }, 'step reward');
      }
      return toWire(result);
    } finally {
      stopTimer();
    }
  }

  state(env: ServedEnvironment): EpisodeState {
    return env.state();
  }
}

/** Exactly the OpenEnv result fields: the in-process `info` must not leak onto the wire. */
function toWire(result: StepResult): StepResult {
  return { observation: result.observation, reward: result.reward, done: result.done };
}
