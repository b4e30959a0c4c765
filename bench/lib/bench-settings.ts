/** A bench's BENCH_* environment variables, parsed once with the defaults in the schema. */
import { z } from 'zod';

/** A positive integer variable with its default (`BENCH_ROUNDS=3`). */
export const positiveInt = (fallback: number) => z.coerce.number().int().positive().default(fallback);

/** Parses `env` (process.env) with `schema`; an invalid variable ends the bench with a message naming it. */
export function benchSettings<S extends z.ZodType>(schema: S, env: NodeJS.ProcessEnv = process.env): z.infer<S> {
  const parsed = schema.safeParse(env);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`).join('; ');
  throw new Error(`bench settings: ${problems}`);
}
