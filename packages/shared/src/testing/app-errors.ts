import { AppError } from '../app-error.ts';

/** The AppError `fn` throws; any other error is rethrown, and throwing nothing fails the test. */
export function appErrorOf(fn: () => unknown): AppError {
  try {
    fn();
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
  throw new Error('expected an AppError, got none');
}

/** The code of the AppError `promise` rejects with; any other error is rethrown, and no rejection fails the test. */
export async function appErrorCodeOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof AppError) return error.code;
    throw error;
  }
  throw new Error('expected a rejection');
}
