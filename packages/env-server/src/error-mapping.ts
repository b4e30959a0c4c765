import type { z } from 'zod';
import { AppError, ErrorCode, toAppError } from '@sqlenv/shared';
import { WsErrorCode, type ErrorFrameData, type ValidationIssue } from '@sqlenv/protocol';

/**
 * The one place where errors cross the server boundary: AppError codes become
 * OpenEnv error-frame codes (WebSocket) or HTTP statuses.
 */

/** zod issues in the pydantic-like shape OpenEnv clients expect: `{loc, msg, type}`. */
export function toValidationIssues(error: z.ZodError, locPrefix: readonly (string | number)[] = []): ValidationIssue[] {
  return error.issues.map((issue) => ({
    loc: [...locPrefix, ...issue.path.map((p) => (typeof p === 'symbol' ? String(p) : p))],
    msg: issue.message,
    type: issue.code,
  }));
}

/** A VALIDATION AppError carrying its issues, for both the WS and the HTTP path. */
export function validationError(message: string, issues: ValidationIssue[]): AppError {
  return new AppError(ErrorCode.VALIDATION, message, { details: { errors: issues } });
}

function issuesOf(error: AppError): ValidationIssue[] {
  const errors = error.details?.['errors'];
  if (Array.isArray(errors)) return errors as ValidationIssue[];
  return [{ loc: [], msg: error.message, type: error.code.toLowerCase() }];
}

/**
 * Error frame for a failed request on a live session. Input problems (bad
 * action, unknown question/database) are VALIDATION_ERROR; anything the
 * environment failed at is EXECUTION_ERROR. Both keep the session open.
 */
export function requestErrorFrame(error: unknown): ErrorFrameData {
  const appError = toAppError(error);
  if (appError.code === ErrorCode.VALIDATION || appError.code === ErrorCode.NOT_FOUND) {
    return { message: appError.message, code: WsErrorCode.VALIDATION_ERROR, errors: issuesOf(appError), app_code: appError.code };
  }
  return { message: appError.message, code: WsErrorCode.EXECUTION_ERROR, app_code: appError.code };
}

/** HTTP status for an AppError (OpenEnv uses 422 for invalid actions); `details.httpStatus` overrides. */
export function httpStatusOf(error: AppError): number {
  const override = error.details?.['httpStatus'];
  if (typeof override === 'number') return override;
  switch (error.code) {
    case ErrorCode.VALIDATION:
      return 422;
    case ErrorCode.NOT_FOUND:
      return 404;
    case ErrorCode.EPISODE_STATE:
      return 409;
    case ErrorCode.CAPACITY:
      // Too many sessions, not a broken server: clients may retry later (RFC 6585).
      return 429;
    case ErrorCode.UNAUTHORIZED:
      return 401;
    case ErrorCode.TIMEOUT:
      return 504;
    default:
      return 500;
  }
}

/** HTTP error body: FastAPI's `{"detail": ...}`; a list of issues for validation errors. */
export function httpErrorBody(error: AppError): { detail: unknown } {
  if (error.code === ErrorCode.VALIDATION && error.details?.['httpStatus'] === undefined) return { detail: issuesOf(error) };
  return { detail: error.message };
}
