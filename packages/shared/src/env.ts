import type { z } from 'zod';
import { AppError, ErrorCode } from './app-error.ts';

/**
 * Parse environment variables (or any string record) with a zod schema, failing
 * fast with a message naming each bad variable. Only apps call this; packages
 * take explicit config.
 */
export function parseEnv<S extends z.ZodType>(schema: S, env: Record<string, string | undefined>): z.infer<S> {
  const result = schema.safeParse(env);
  if (!result.success) {
    const problems = result.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
    throw new AppError(ErrorCode.VALIDATION, `invalid environment: ${problems}`, { details: { issues: result.error.issues } });
  }
  return result.data;
}

/** Render zod issues as one readable line: `path: message; path: message`. */
export function formatZodIssues(error: z.ZodError): string {
  return error.issues.map((i) => `${i.path.length > 0 ? i.path.join('.') : '(root)'}: ${i.message}`).join('; ');
}
