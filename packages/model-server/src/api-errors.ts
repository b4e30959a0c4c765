import type { ServerResponse } from 'node:http';
import type { z } from 'zod';
import type { ApiError } from '@sqlenv/protocol';
import { AppError, ErrorCode, formatZodIssues, sendJson, toAppError } from '@sqlenv/shared';

/** vLLM's error `type` per HTTP status. */
const ERROR_TYPES: Record<number, string> = {
  400: 'BadRequestError',
  404: 'NotFoundError',
  405: 'MethodNotAllowedError',
  413: 'RequestEntityTooLargeError',
  503: 'ServiceUnavailableError',
  500: 'InternalServerError',
};

/** HTTP status of each error code reaching a route (the one translation of AppError at this boundary). */
const STATUS_OF: Partial<Record<ErrorCode, number>> = {
  [ErrorCode.VALIDATION]: 400,
  [ErrorCode.MODEL]: 400,
  [ErrorCode.NOT_FOUND]: 404,
  [ErrorCode.CAPACITY]: 503,
  [ErrorCode.ABORTED]: 503,
};

export function apiErrorBody(status: number, message: string, param: string | null = null): ApiError {
  return { object: 'error', message, type: ERROR_TYPES[status] ?? 'InternalServerError', param, code: status };
}

export function sendApiError(res: ServerResponse, status: number, message: string, param: string | null = null, headers: Record<string, string> = {}): void {
  sendJson(res, status, apiErrorBody(status, message, param), headers);
}

/** A request the server refuses (400 unless `code` says otherwise), naming the request field at fault. */
export function refuse(param: string, message: string, code: ErrorCode = ErrorCode.VALIDATION): AppError {
  return new AppError(code, message, { details: { param } });
}

/** Send what a route threw (`details.status` overrides the code's status); returns the status sent. Unknown errors are 500 with their message. */
export function sendThrown(res: ServerResponse, thrown: unknown): number {
  const error = toAppError(thrown);
  const given = error.details?.['status'];
  const status = typeof given === 'number' ? given : (STATUS_OF[error.code] ?? 500);
  const param = typeof error.details?.['param'] === 'string' ? error.details['param'] : null;
  sendApiError(res, status, error.message, param);
  return status;
}

/** Parse a request body with its schema; a failure is a 400 naming the first bad field. */
export function parseBody<S extends z.ZodType>(schema: S, body: unknown): z.output<S> {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const first = parsed.error.issues[0];
  const param = first === undefined || first.path.length === 0 ? null : first.path.map(String).join('.');
  throw new AppError(ErrorCode.VALIDATION, formatZodIssues(parsed.error), param === null ? {} : { details: { param } });
}
