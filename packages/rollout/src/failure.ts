import { ErrorCode, isAppError, toAppError } from '@sqlenv/shared';

/**
 * Whether an episode failure is permanent (never retried). A malformed job or
 * an action the schema rejects will fail the same way every time; anything
 * else (an environment crash, a timeout, a lost connection) gets a fresh
 * environment and another attempt.
 */
export function isPermanentFailure(error: unknown): boolean {
  return isAppError(error) && error.code === ErrorCode.VALIDATION;
}

/** `CODE: message`, the reason recorded on failed jobs and groups. */
export function failureReason(error: unknown): string {
  const appError = toAppError(error);
  return `${appError.code}: ${appError.message}`;
}

/** Exponential backoff before attempt `attempt + 1` (attempt is 1-based), in milliseconds. */
export function retryDelayMs(baseMs: number, attempt: number): number {
  return baseMs * 2 ** Math.max(0, attempt - 1);
}
