import { z } from 'zod';
import { SqlActionSchema } from './sql-action.ts';
import { SqlObservationSchema } from './sql-observation.ts';
import { EpisodeStateSchema } from './episode.ts';

/** JSON Schema (draft 2020-12) generated from a zod schema: the one source of truth. */
export function toJsonSchema(schema: z.ZodType): Record<string, unknown> {
  return z.toJSONSchema(schema, { target: 'draft-2020-12', unrepresentable: 'any' }) as Record<string, unknown>;
}

/** The `/schema` document of an OpenEnv server: action, observation and state schemas. */
export function openEnvSchemas(): { action: Record<string, unknown>; observation: Record<string, unknown>; state: Record<string, unknown> } {
  return {
    action: toJsonSchema(SqlActionSchema),
    observation: toJsonSchema(SqlObservationSchema),
    state: toJsonSchema(EpisodeStateSchema),
  };
}
