import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { childBundleDir, ensureBundleFile, executorChildEntry } from './child-entry.ts';

describe('executorChildEntry', () => {
  it('bundles the child into one plain module in a private per-user dir in the temp dir', () => {
    const entry = executorChildEntry();
    expect(entry.fallbackReason).toBeUndefined();
    expect(entry.bundled).toBe(true);
    expect(entry.execArgv).toEqual([]);
    const file = fileURLToPath(entry.module);
    expect(file.startsWith(childBundleDir())).toBe(true);
    expect(childBundleDir().startsWith(tmpdir())).toBe(true);
    expect(statSync(childBundleDir()).mode & 0o777).toBe(0o700);
    const code = readFileSync(file, 'utf8');
    // better-sqlite3 by its resolved location (it would not resolve from the temp dir), nothing else external.
    expect(code).toMatch(/from "file:\/\/[^"]*better-sqlite3[^"]*"/);
    expect(code).not.toMatch(/from "(pino|zod|tsx)"/);
    expect(executorChildEntry().module.href).toBe(entry.module.href);
  });
});

describe('ensureBundleFile', () => {
  it('writes the code once, then leaves it alone while it is intact and rewrites it when it is not', () => {
    const dir = join(mkdtempSync(join(tmpdir(), 'sqlenv-bundle-')), 'private');
    try {
      const first = ensureBundleFile(dir, 'export const a = 1;\n');
      expect(first.rewritten).toBe(false);
      expect(statSync(first.path).mode & 0o777).toBe(0o600);
      expect(ensureBundleFile(dir, 'export const a = 1;\n')).toEqual({ path: first.path, rewritten: false });
      writeFileSync(first.path, 'export const a = 2;\n');
      expect(ensureBundleFile(dir, 'export const a = 1;\n')).toEqual({ path: first.path, rewritten: true });
      expect(readFileSync(first.path, 'utf8')).toBe('export const a = 1;\n');
    } finally {
      rmSync(join(dir, '..'), { recursive: true, force: true });
    }
  });
});
