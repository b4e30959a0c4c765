import type { EpisodeState, ResetOptions, RewardBreakdown, SqlAction, StepResult } from '@sqlenv/protocol';

/**
 * What the server needs from an environment: the shape of `SqlEnvironment`
 * from @sqlenv/sql-env, written structurally so the server depends on the
 * behaviour, not the class. `step` may return a `StepOutcome` (with `info`);
 * the server sends only observation/reward/done on the wire.
 */
export interface ServedEnvironment {
  reset(options?: ResetOptions): Promise<StepResult>;
  step(action: SqlAction): Promise<StepResult & { info?: { sql_ms?: number | undefined; reward_breakdown?: RewardBreakdown } }>;
  state(): EpisodeState;
  close(): void;
}

/** One question as the catalog shows it: ids and text only, never gold data or paths. */
export interface CatalogQuestion {
  question_id: string;
  question_text: string;
  database_name: string;
  difficulty: string;
  split: string;
}

/** The loaded dataset, as far as the server looks at it. */
export interface ServedDataset {
  name: string;
  databases: ReadonlyMap<string, unknown>;
  questions: readonly CatalogQuestion[];
}

/** The runtime the server serves: `createSqlEnvRuntime(...)`'s result has this shape. */
export interface ServedRuntime {
  dataset: ServedDataset;
  /** The episode config: `rewardMode` says what reward clients see (logged at start; sql-env's runtime has it). */
  readonly config?: { readonly rewardMode?: 'train' | 'eval' };
  createEnvironment(): ServedEnvironment;
  close(): Promise<void>;
}
