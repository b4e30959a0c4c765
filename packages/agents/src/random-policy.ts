import type { SqlAction, SqlObservation } from '@sqlenv/protocol';
import type { EpisodeContext, Policy, PolicyEpisode } from './policy.ts';
import { mulberry32, hashString, mixSeeds, pick } from '@sqlenv/shared';
import { tableNamesFromSchemaInfo } from './schema-info.ts';

export interface RandomPolicyOptions {
  /** Base seed; each episode mixes in its own seed, so runs are reproducible. Default 0. */
  seed?: number;
  /** Probability of answering at each step once something was seen (0..1). Default 0.15. */
  answerProbability?: number;
}

/**
 * The lower-bound baseline: uniformly random tools on the tables it can see,
 * random small queries, and an answer picked from whatever text it last saw.
 * Reproducible for a given (seed, episode seed).
 */
export class RandomPolicy implements Policy {
  readonly name = 'random';
  readonly #seed: number;
  readonly #answerProbability: number;

  constructor(options: RandomPolicyOptions = {}) {
    this.#seed = options.seed ?? 0;
    this.#answerProbability = options.answerProbability ?? 0.15;
  }

  begin(context: EpisodeContext): PolicyEpisode {
    const rng = mulberry32(mixSeeds(mixSeeds(this.#seed, context.seed), hashString(context.questionId)));
    const answerProbability = this.#answerProbability;
    return {
      act: (observation: SqlObservation): Promise<SqlAction> => {
        const tables = tableNamesFromSchemaInfo(observation.schema_info);
        const lastBudget = observation.budget_remaining <= 1;
        if (tables.length === 0 || lastBudget || (observation.step_count > 0 && rng() < answerProbability)) {
          return Promise.resolve({ action_type: 'ANSWER', argument: randomAnswer(rng, observation.result) });
        }
        const table = pick(rng, tables);
        const quoted = `"${table.replaceAll('"', '""')}"`;
        const roll = rng();
        if (roll < 0.35) return Promise.resolve({ action_type: 'DESCRIBE', argument: table });
        if (roll < 0.6) return Promise.resolve({ action_type: 'SAMPLE', argument: table });
        const queries = [
          `SELECT COUNT(*) FROM ${quoted}`,
          `SELECT * FROM ${quoted} LIMIT ${1 + Math.floor(rng() * 5)}`,
          `SELECT * FROM ${quoted} ORDER BY random() LIMIT 1`,
        ];
        return Promise.resolve({ action_type: 'QUERY', argument: pick(rng, queries) });
      },
    };
  }
}

/** A word or number lifted from the last result, or a random integer. */
function randomAnswer(rng: () => number, lastResult: string): string {
  // Cells of the rendered table, not its decoration ("(3 rows)", separators).
  const tokens = lastResult.split(/[\s|,()]+/).filter((token) => token.length > 0 && token.length < 40 && /[\p{L}\p{N}]/u.test(token) && !/^rows?$/.test(token));
  if (tokens.length > 0 && rng() < 0.7) return pick(rng, tokens);
  return String(Math.floor(rng() * 100));
}
