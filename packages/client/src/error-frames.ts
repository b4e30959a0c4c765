import { AppError, ErrorCode } from '@sqlenv/shared';
import { WsErrorCode, type ErrorFrameData } from '@sqlenv/protocol';

const appCodes: ReadonlySet<string> = new Set(Object.values(ErrorCode));

/** OpenEnv error-frame code → AppError code, for servers that do not send `app_code`. */
const fromWsCode: Record<WsErrorCode, ErrorCode> = {
  [WsErrorCode.INVALID_JSON]: ErrorCode.VALIDATION,
  [WsErrorCode.UNKNOWN_TYPE]: ErrorCode.VALIDATION,
  [WsErrorCode.VALIDATION_ERROR]: ErrorCode.VALIDATION,
  [WsErrorCode.EXECUTION_ERROR]: ErrorCode.INTERNAL,
  [WsErrorCode.CAPACITY_REACHED]: ErrorCode.CAPACITY,
  [WsErrorCode.FACTORY_ERROR]: ErrorCode.INTERNAL,
  [WsErrorCode.SESSION_ERROR]: ErrorCode.TRANSPORT,
};

/**
 * Turn a server error frame into an AppError. The precise code comes from our
 * server's `app_code` when present (EPISODE_STATE, NOT_FOUND...), else from the
 * OpenEnv code; CAPACITY_REACHED is always CAPACITY. The frame's fields
 * (wsCode, errors, active_sessions, max_sessions) travel in `details`.
 */
export function appErrorFromFrame(data: ErrorFrameData): AppError {
  const byApp = data.app_code !== undefined && appCodes.has(data.app_code) ? (data.app_code as ErrorCode) : undefined;
  const code = data.code === WsErrorCode.CAPACITY_REACHED ? ErrorCode.CAPACITY : (byApp ?? fromWsCode[data.code]);
  const { message, code: wsCode, ...rest } = data;
  return new AppError(code, `${message} (code: ${wsCode})`, { details: { wsCode, ...rest } });
}
