/**
 * How an executor child process starts. Through tsx, every start pays for the
 * TypeScript loader and its esbuild service: about 0.5 s of CPU per child,
 * which a runaway query's replacement costs again each time. So once per
 * process we bundle executor-child.ts and its few imports into one plain ES
 * module (with esbuild, which tsx already depends on), store it in the OS temp
 * directory under its content hash, and start children on it with plain node
 * (a tenth of the CPU). better-sqlite3 stays outside the bundle (a native
 * addon), imported by its resolved path. If bundling fails for any reason,
 * children start through tsx as before.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type * as Esbuild from 'esbuild';

export interface ChildEntry {
  /** The module to fork. */
  module: URL;
  /** Node options that the module needs (the TypeScript loader when not bundled). */
  execArgv: string[];
  bundled: boolean;
  /** Why the bundle could not be used (bundled: false). */
  fallbackReason?: string;
}

const SOURCE = new URL('./executor-child.ts', import.meta.url);
const SQLITE_IMPORT = 'from "better-sqlite3"';

let entry: ChildEntry | undefined;

function bundle(): ChildEntry {
  const require = createRequire(import.meta.url);
  // Loaded only here: a process that never starts a child does not pay for it.
  const esbuild = require('esbuild') as typeof Esbuild;
  const built = esbuild.buildSync({
    entryPoints: [fileURLToPath(SOURCE)],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    external: ['better-sqlite3'],
    write: false,
    logLevel: 'silent',
  });
  const text = built.outputFiles[0]?.text ?? '';
  if (text.split(SQLITE_IMPORT).length !== 2) throw new Error(`expected one ${SQLITE_IMPORT} in the bundle`);
  // The bundle lives outside the project, where 'better-sqlite3' would not resolve.
  const code = text.replace(SQLITE_IMPORT, `from ${JSON.stringify(pathToFileURL(require.resolve('better-sqlite3')).href)}`);
  const dir = join(tmpdir(), 'sqlenv-ts');
  const file = join(dir, `executor-child-${createHash('sha256').update(code).digest('hex').slice(0, 16)}.mjs`);
  if (!existsSync(file)) {
    mkdirSync(dir, { recursive: true });
    // Written aside then renamed: a concurrent process never sees half a file.
    const partial = `${file}.${process.pid}.tmp`;
    writeFileSync(partial, code);
    renameSync(partial, file);
  }
  return { module: pathToFileURL(file), execArgv: [], bundled: true };
}

/** The child entry for this process: bundled once, or the TypeScript source through tsx. */
export function executorChildEntry(): ChildEntry {
  if (entry !== undefined) return entry;
  try {
    entry = bundle();
  } catch (error) {
    entry = {
      module: SOURCE,
      execArgv: ['--import', import.meta.resolve('tsx')],
      bundled: false,
      fallbackReason: error instanceof Error ? error.message : String(error),
    };
  }
  return entry;
}
