import { chmodSync, chownSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { AppError, ErrorCode } from './app-error.ts';
import { ensurePrivateDir, readTrustedFile, writeExclusiveTemp, writePrivateFile } from './private-dir.ts';

const scratch = mkdtempSync(join(tmpdir(), 'sqlenv-private-dir-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const isRoot = process.getuid?.() === 0;

function unsafeError(run: () => unknown): AppError {
  let caught: unknown;
  try {
    run();
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(AppError);
  expect((caught as AppError).code).toBe(ErrorCode.UNSAFE_PATH);
  return caught as AppError;
}

describe('ensurePrivateDir', () => {
  it('creates a missing directory 0700 and accepts it again', () => {
    const dir = join(scratch, 'fresh');
    expect(ensurePrivateDir(dir)).toBe(dir);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(ensurePrivateDir(dir)).toBe(dir);
  });

  it('accepts an existing directory of ours that only we may write (0755)', () => {
    const dir = join(scratch, 'readable');
    mkdirSync(dir, { mode: 0o755 });
    chmodSync(dir, 0o755);
    expect(ensurePrivateDir(dir)).toBe(dir);
  });

  it('refuses a directory that group or others may write, saying so', () => {
    const dir = join(scratch, 'shared');
    mkdirSync(dir);
    chmodSync(dir, 0o777);
    expect(unsafeError(() => ensurePrivateDir(dir)).message).toMatch(/writable by group or others \(mode 777\)/);
  });

  it.skipIf(!isRoot)('refuses a directory another user owns', () => {
    const dir = join(scratch, 'theirs');
    mkdirSync(dir, { mode: 0o700 });
    chownSync(dir, 65534, 65534);
    expect(unsafeError(() => ensurePrivateDir(dir)).message).toMatch(/owned by uid 65534, not by this user/);
  });

  it('refuses a symlink in place of the directory unless the caller names it as one', () => {
    const target = join(scratch, 'target');
    mkdirSync(target, { mode: 0o700 });
    const link = join(scratch, 'link');
    symlinkSync(target, link);
    expect(unsafeError(() => ensurePrivateDir(link)).message).toMatch(/symbolic link/);
    expect(ensurePrivateDir(link, { followSymlink: true })).toBe(link);
  });

  it('refuses a file in place of the directory', () => {
    const file = join(scratch, 'a-file');
    writeFileSync(file, '');
    expect(unsafeError(() => ensurePrivateDir(file)).message).toMatch(/not a directory/);
  });
});

describe('private files', () => {
  it('a symlink planted at the temporary name makes the write fail instead of following it', () => {
    const dir = ensurePrivateDir(join(scratch, 'temp-link'));
    const victim = join(scratch, 'victim.txt');
    writeFileSync(victim, 'keep');
    symlinkSync(victim, join(dir, 'planted.tmp'));
    expect(() => writeExclusiveTemp(dir, 'data', 'evil', 0o600, join(dir, 'planted.tmp'))).toThrow(/EEXIST/);
    expect(readFileSync(victim, 'utf8')).toBe('keep');
  });

  it('writePrivateFile replaces a symlink at the target instead of writing through it, and leaves no temp file', () => {
    const dir = ensurePrivateDir(join(scratch, 'target-link'));
    const victim = join(scratch, 'victim-2.txt');
    writeFileSync(victim, 'keep');
    symlinkSync(victim, join(dir, 'data'));
    const path = writePrivateFile(dir, 'data', 'fresh');
    expect(readFileSync(victim, 'utf8')).toBe('keep');
    expect(readFileSync(path, 'utf8')).toBe('fresh');
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(readdirSync(dir)).toEqual(['data']);
  });

  it('readTrustedFile: absent is undefined; a symlink, a shared-writable file or a readable secret is refused', () => {
    const dir = ensurePrivateDir(join(scratch, 'reads'));
    expect(readTrustedFile(join(dir, 'none'))).toBeUndefined();
    const path = writePrivateFile(dir, 'ok', 'yes');
    expect(readTrustedFile(path, { secret: true })?.toString()).toBe('yes');
    symlinkSync(path, join(dir, 'link'));
    expect(unsafeError(() => readTrustedFile(join(dir, 'link'))).message).toMatch(/symbolic link/);
    chmodSync(path, 0o666);
    expect(unsafeError(() => readTrustedFile(path)).message).toMatch(/writable by group or others/);
    chmodSync(path, 0o644);
    expect(readTrustedFile(path)?.toString()).toBe('yes');
    expect(unsafeError(() => readTrustedFile(path, { secret: true })).message).toMatch(/others may read it/);
  });
});
