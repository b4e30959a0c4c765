import { describe, expect, it } from 'vitest';
import { startWorker } from './ts-worker.ts';
import { AppError, ErrorCode, toAppError } from './app-error.ts';

describe('startWorker', () => {
  it('runs a TypeScript worker module and passes it data', async () => {
    const worker = startWorker(new URL('./testing/echo-worker.ts', import.meta.url), { data: { n: 41 } });
    const reply = await new Promise((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    await worker.terminate();
    expect(reply).toEqual({ n: 42 });
  });
});

describe('toAppError', () => {
  it('keeps AppErrors and wraps the rest with a cause', () => {
    const original = new AppError(ErrorCode.TIMEOUT, 'slow');
    expect(toAppError(original)).toBe(original);
    const wrapped = toAppError(new Error('boom'));
    expect(wrapped.code).toBe(ErrorCode.INTERNAL);
    expect(wrapped.cause).toBeInstanceOf(Error);
    expect(toAppError('text').message).toBe('text');
  });
});
