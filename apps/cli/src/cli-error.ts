import { AppError, ErrorCode } from '@sqlenv/shared';

/**
 * A usage error (bad flags, a missing argument): printed as one line, exit code 2. It is an AppError
 * VALIDATION, so a command that reports its own errors (the apps' entry points) also exits 2.
 * Everything else that escapes a command is printed as one line with exit code 1.
 */
export class UsageError extends AppError {
  override readonly name = 'UsageError';

  constructor(message: string) {
    super(ErrorCode.VALIDATION, message);
  }
}

export const ExitCode = { OK: 0, FAILURE: 1, USAGE: 2 } as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];
