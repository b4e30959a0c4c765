import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { executorChildEntry } from './child-entry.ts';

describe('executorChildEntry', () => {
  it('bundles the child into one plain module in the temp dir, once per process', () => {
    const entry = executorChildEntry();
    expect(entry.fallbackReason).toBeUndefined();
    expect(entry.bundled).toBe(true);
    expect(entry.execArgv).toEqual([]);
    const file = fileURLToPath(entry.module);
    expect(file.startsWith(tmpdir())).toBe(true);
    const code = readFileSync(file, 'utf8');
    // better-sqlite3 by its resolved location (it would not resolve from the temp dir), nothing else external.
    expect(code).toMatch(/from "file:\/\/[^"]*better-sqlite3[^"]*"/);
    expect(code).not.toMatch(/from "(pino|zod|tsx)"/);
    expect(executorChildEntry()).toBe(entry);
  });
});
