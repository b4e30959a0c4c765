import { describe, expect, it } from 'vitest';
import { AppError, ErrorCode } from '@sqlenv/shared';
import { appErrorFromFrame } from './error-frames.ts';
import { toWebSocketUrl } from './ws-url.ts';

describe('toWebSocketUrl', () => {
  it('derives the session URL like the OpenEnv client: scheme swap, then /ws', () => {
    expect(toWebSocketUrl('http://localhost:8000')).toBe('ws://localhost:8000/ws');
    expect(toWebSocketUrl('https://space.hf.space/')).toBe('wss://space.hf.space/ws');
    expect(toWebSocketUrl('ws://h:1/ws')).toBe('ws://h:1/ws');
    expect(toWebSocketUrl('http://h:1/prefix?api_key=k')).toBe('ws://h:1/prefix/ws?api_key=k');
  });

  it('rejects what is not a server address', () => {
    expect(() => toWebSocketUrl('localhost:8000')).toThrow(AppError);
    expect(() => toWebSocketUrl('ftp://h')).toThrow(/unsupported URL scheme/);
  });
});

describe('appErrorFromFrame', () => {
  it('prefers the precise app_code and keeps the frame fields in details', () => {
    const error = appErrorFromFrame({ message: 'no episode', code: 'EXECUTION_ERROR', app_code: 'EPISODE_STATE' });
    expect(error.code).toBe(ErrorCode.EPISODE_STATE);
    expect(error.message).toBe('no episode (code: EXECUTION_ERROR)');
    expect(error.details).toEqual({ wsCode: 'EXECUTION_ERROR', app_code: 'EPISODE_STATE' });
  });

  it('maps stock OpenEnv codes when app_code is absent or unknown', () => {
    expect(appErrorFromFrame({ message: 'm', code: 'CAPACITY_REACHED', active_sessions: 1, max_sessions: 1 }).code).toBe(ErrorCode.CAPACITY);
    expect(appErrorFromFrame({ message: 'm', code: 'INVALID_JSON' }).code).toBe(ErrorCode.VALIDATION);
    expect(appErrorFromFrame({ message: 'm', code: 'SESSION_ERROR' }).code).toBe(ErrorCode.TRANSPORT);
    expect(appErrorFromFrame({ message: 'm', code: 'EXECUTION_ERROR', app_code: 'NOT_A_CODE' }).code).toBe(ErrorCode.INTERNAL);
  });
});
