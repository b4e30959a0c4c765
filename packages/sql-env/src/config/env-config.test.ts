import { describe, expect, it } from 'vitest';
import { AppError, ErrorCode } from '@sqlenv/shared';
import { parseEnvConfig } from './env-config.ts';

describe('parseEnvConfig', () => {
  it('fills defaults once and passes its own result through untouched', () => {
    const config = parseEnvConfig({ stepBudget: 10 });
    expect(config.stepBudget).toBe(10);
    expect(config.resultMaxRows).toBe(20);
    expect(config.floatMatch).toBe('relative');
    expect(parseEnvConfig({ floatMatch: 'precision' }).floatMatch).toBe('precision');
    expect(() => parseEnvConfig({ floatMatch: 'exact' } as never)).toThrow(/floatMatch/);
    expect(parseEnvConfig(config)).toBe(config);
    // An equal object it did not produce is parsed again (and copied).
    const copy = { ...config };
    expect(parseEnvConfig(copy)).not.toBe(copy);
    expect(parseEnvConfig(copy)).toEqual(config);
  });

  it('names the bad field', () => {
    let error: unknown;
    try {
      parseEnvConfig({ stepBudget: 0 });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe(ErrorCode.VALIDATION);
    expect((error as AppError).message).toContain('stepBudget');
  });
});
