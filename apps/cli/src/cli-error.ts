/**
 * A usage error: printed as one line, exit code 2. Everything else that
 * escapes a command is printed as one line with exit code 1.
 */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

export const ExitCode = { OK: 0, FAILURE: 1, USAGE: 2 } as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];
