import { existsSync, readFileSync } from 'node:fs';
import type { z } from 'zod';
import { AppError, ErrorCode } from '@sqlenv/shared';

/**
 * A JSON file of a run directory read against its schema: undefined when it does not exist, else
 * the parsed value; AppError VALIDATION naming the path when it is not JSON or not of the schema
 * (`invalid` says how).
 */
export function readJsonFile<S extends z.ZodType>(path: string, schema: S, invalid: (error: z.ZodError) => string): z.infer<S> | undefined {
  if (!existsSync(path)) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    throw new AppError(ErrorCode.VALIDATION, `${path}: not valid JSON`);
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) throw new AppError(ErrorCode.VALIDATION, `${path}: ${invalid(parsed.error)}`);
  return parsed.data;
}
