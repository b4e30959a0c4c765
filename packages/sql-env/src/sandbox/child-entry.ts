/**
 * How an executor child process starts. Through tsx, every start pays for the
 * TypeScript loader and its esbuild service: about 0.5 s of CPU per child,
 * which a runaway query's replacement costs again each time. So once per
 * process we bundle executor-child.ts and its few imports into one plain ES
 * module (with esbuild, which tsx already depends on), store it under its
 * content hash, and start children on it with plain node (a tenth of the
 * CPU). better-sqlite3 stays outside the bundle (a native addon), imported by
 * its resolved path. If bundling fails for any reason, children start through
 * tsx as before.
 *
 * The bundle is code that runs as this user, so where it lives is checked
 * (see @sqlenv/shared private-dir.ts): a per-user directory in the OS temp
 * directory (`sqlenv-ts-<uid>`, created 0700, refused when another user owns
 * it or others may write to it), written under an unguessable name with
 * exclusive creation and renamed into place, and read back and compared with
 * the bundle's SHA-256 before EVERY child start: a file edited, replaced or
 * turned into a symlink is rewritten, never executed. A directory that fails
 * its check is not used at all: children then start through tsx (slower, but
 * running only the project's own code).
 */
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type * as Esbuild from 'esbuild';
import { AppError, ErrorCode, ensurePrivateDir, readTrustedFile, writePrivateFile } from '@sqlenv/shared';

export interface ChildEntry {
  /** The module to fork. */
  module: URL;
  /** Node options that the module needs (the TypeScript loader when not bundled). */
  execArgv: string[];
  bundled: boolean;
  /** Why the bundle could not be used (bundled: false). */
  fallbackReason?: string;
  /** The bundle file did not hold the bundle (edited, replaced, a symlink) and was rewritten before this use. */
  rewritten?: true;
}

const SOURCE = new URL('./executor-child.ts', import.meta.url);
const SQLITE_IMPORT = 'from "better-sqlite3"';

/** The bundle's text and SHA-256 (hex), built once per process; an Error if bundling failed. */
let built: { code: string; sha256: string } | Error | undefined;

function sha256(data: string | Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

function bundleCode(): { code: string; sha256: string } {
  const require = createRequire(import.meta.url);
  // Loaded only here: a process that never starts a child does not pay for it.
  const esbuild = require('esbuild') as typeof Esbuild;
  const output = esbuild.buildSync({
    entryPoints: [fileURLToPath(SOURCE)],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    external: ['better-sqlite3'],
    write: false,
    logLevel: 'silent',
  });
  const text = output.outputFiles[0]?.text ?? '';
  if (text.split(SQLITE_IMPORT).length !== 2) throw new Error(`expected one ${SQLITE_IMPORT} in the bundle`);
  // The bundle lives outside the project, where 'better-sqlite3' would not resolve.
  const code = text.replace(SQLITE_IMPORT, `from ${JSON.stringify(pathToFileURL(require.resolve('better-sqlite3')).href)}`);
  return { code, sha256: sha256(code) };
}

/** This user's private directory for the bundle, in the OS temp directory. */
export function childBundleDir(): string {
  return join(tmpdir(), `sqlenv-ts-${process.getuid?.() ?? 'user'}`);
}

/**
 * Make `dir` (checked private, see the header) hold `code` under its content
 * hash, and return the file's path: the file there is read (not through a
 * symlink, and only if this user's and not writable by others) and compared
 * with the code's SHA-256; anything else in its place is replaced by a fresh
 * copy. Throws UNSAFE_PATH when `dir` may not be trusted.
 */
export function ensureBundleFile(dir: string, code: string): { path: string; rewritten: boolean } {
  ensurePrivateDir(dir, { advice: 'another user may have created it to plant code; executor children start through tsx until it is removed' });
  const digest = sha256(code);
  const name = `executor-child-${digest.slice(0, 16)}.mjs`;
  const path = join(dir, name);
  let current: Buffer | undefined;
  try {
    current = readTrustedFile(path);
  } catch (error) {
    // A symlink, someone else's file...: replaced below like a wrong one.
    if (!(error instanceof AppError) || error.code !== ErrorCode.UNSAFE_PATH) throw error;
    current = Buffer.alloc(0);
  }
  if (current !== undefined && sha256(current) === digest) return { path, rewritten: false };
  writePrivateFile(dir, name, code, 0o600);
  return { path, rewritten: current !== undefined };
}

/**
 * The child entry for the next child start: the bundle, checked (and rewritten
 * if need be) on every call, or the TypeScript source through tsx when the
 * bundle cannot be built or its directory may not be trusted.
 */
export function executorChildEntry(): ChildEntry {
  try {
    if (built === undefined) {
      try {
        built = bundleCode();
      } catch (error) {
        built = error instanceof Error ? error : new Error(String(error));
      }
    }
    if (built instanceof Error) throw built;
    const { path, rewritten } = ensureBundleFile(childBundleDir(), built.code);
    return { module: pathToFileURL(path), execArgv: [], bundled: true, ...(rewritten ? { rewritten: true as const } : {}) };
  } catch (error) {
    return {
      module: SOURCE,
      execArgv: ['--import', import.meta.resolve('tsx')],
      bundled: false,
      fallbackReason: error instanceof Error ? error.message : String(error),
    };
  }
}
