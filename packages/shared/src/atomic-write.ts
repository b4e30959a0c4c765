/**
 * Every output this project writes for people (model directories, adapters,
 * saved evaluations, report.html) goes through these helpers, so that:
 *
 * - a failure leaves nothing half-written: data is written under a temporary
 *   sibling name (`.<name>.<random>.tmp`) and renamed into place, and the
 *   temporary is removed on any error;
 * - an output never replaces what the operator did not mean to replace: a
 *   non-empty directory or an existing file is refused unless `force` is
 *   given, and an output is never written over (or inside, or around) one of
 *   the command's inputs, force or not;
 * - a path of the wrong kind (a directory where a file goes) is refused by
 *   name before anything is written.
 */
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, lstatSync, mkdirSync, openSync, readdirSync, realpathSync, renameSync, rmSync, writeSync } from 'node:fs';
import { basename, dirname, join, relative, resolve, isAbsolute } from 'node:path';
import { AppError, ErrorCode } from './app-error.ts';

export interface OutputOptions {
  /** Replace an existing non-empty directory or an existing file. Default false. */
  force?: boolean;
  /** How the output is named in errors (a flag such as `--out`). Default: the path. */
  label?: string;
}

/** A fresh temporary sibling of `path` (hidden, unguessable, ending in .tmp). */
export function temporarySibling(path: string, suffix = 'tmp'): string {
  return join(dirname(path), `.${basename(path)}.${randomBytes(6).toString('hex')}.${suffix}`);
}

function kindOf(path: string): 'missing' | 'file' | 'directory' | 'other' {
  try {
    const info = lstatSync(path);
    if (info.isDirectory()) return 'directory';
    return info.isFile() || info.isSymbolicLink() ? 'file' : 'other';
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 'missing';
    throw error;
  }
}

function named(path: string, options: OutputOptions): string {
  return options.label === undefined ? path : `${options.label} ${path}`;
}

/**
 * Check that `path` may receive a new file: not a directory, and absent unless
 * `force`. Throws VALIDATION naming the path; writes nothing.
 */
export function checkFileOutput(path: string, options: OutputOptions = {}): void {
  const kind = kindOf(path);
  if (kind === 'directory') throw new AppError(ErrorCode.VALIDATION, `cannot write ${named(path, options)}: it is a directory`, { details: { path } });
  if (kind === 'other') throw new AppError(ErrorCode.VALIDATION, `cannot write ${named(path, options)}: it is not a regular file`, { details: { path } });
  if (kind === 'file' && options.force !== true) {
    throw new AppError(ErrorCode.VALIDATION, `${named(path, options)} already exists; pass --force to replace it`, { details: { path } });
  }
}

/**
 * Check that `path` may become an output directory: absent, or an empty
 * directory, or (with `force`) a directory to be replaced. A file there is
 * refused, force or not. Writes nothing.
 */
export function checkDirOutput(path: string, options: OutputOptions = {}): void {
  const kind = kindOf(path);
  if (kind === 'missing') return;
  if (kind !== 'directory') throw new AppError(ErrorCode.VALIDATION, `cannot write ${named(path, options)}: it exists and is not a directory`, { details: { path } });
  if (readdirSync(path).length > 0 && options.force !== true) {
    throw new AppError(ErrorCode.VALIDATION, `${named(path, options)} is not empty; pass --force to replace it, or choose another directory`, { details: { path } });
  }
}

/** The real path of `path`, or of its nearest existing ancestor with the rest appended (symlinks resolved). */
function realish(path: string): string {
  const absolute = resolve(path);
  let existing = absolute;
  const rest: string[] = [];
  while (!existsSync(existing)) {
    const parent = dirname(existing);
    if (parent === existing) break;
    rest.unshift(basename(existing));
    existing = parent;
  }
  return join(realpathSync(existing), ...rest);
}

function within(parent: string, child: string): boolean {
  const rel = relative(parent, child);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

/**
 * Refuse an output that is one of the inputs, lies inside one, or contains
 * one (replacing it would delete the input): `--out` equal to or inside
 * `--model`, even with --force. Symlinks are resolved on both sides.
 */
export function checkOutputNotInput(output: { label: string; path: string }, inputs: readonly { label: string; path: string | undefined }[]): void {
  const out = realish(output.path);
  for (const input of inputs) {
    if (input.path === undefined) continue;
    const inp = realish(input.path);
    if (within(inp, out) || within(out, inp)) {
      const how = out === inp ? 'is' : within(inp, out) ? 'is inside' : 'contains';
      throw new AppError(ErrorCode.VALIDATION, `${output.label} ${output.path} ${how} ${input.label} ${input.path}: an output never replaces an input; choose another ${output.label}`, {
        details: { output: output.path, input: input.path },
      });
    }
  }
}

/**
 * Write `data` to `path` atomically: a reader sees the old file or the whole
 * new one; on any error the temporary is removed and `path` is untouched.
 * Replaces an existing file (callers that must not, check with
 * checkFileOutput first); refuses a directory at `path` by name.
 */
export function writeFileAtomic(path: string, data: string | Uint8Array, options: { mode?: number } = {}): string {
  checkFileOutput(path, { force: true });
  mkdirSync(dirname(path), { recursive: true });
  const temp = temporarySibling(path);
  try {
    // 'wx': exclusive creation, so a name planted at the temporary path redirects nothing.
    const fd = openSync(temp, 'wx', options.mode ?? 0o644);
    try {
      const bytes = typeof data === 'string' ? Buffer.from(data) : data;
      for (let at = 0; at < bytes.length; ) at += writeSync(fd, bytes, at, Math.min(bytes.length - at, 1 << 30));
    } finally {
      closeSync(fd);
    }
    renameSync(temp, path);
  } catch (error) {
    rmSync(temp, { force: true });
    if (error instanceof AppError) throw error;
    throw new AppError(ErrorCode.VALIDATION, `cannot write ${path}: ${(error as Error).message}`, { cause: error, details: { path } });
  }
  return path;
}

/**
 * Build the directory `path` atomically: `fill` writes into a fresh temporary
 * sibling directory, which then replaces `path` by rename. A non-empty
 * directory at `path` is refused unless `force` (checked before `fill` runs);
 * with force the old directory is moved aside and deleted only after the new
 * one is in place. If `fill` throws, the temporary directory is deleted and
 * `path` is as it was. Returns what `fill` returns.
 */
export function writeDirAtomic<T>(path: string, fill: (dir: string) => T, options: OutputOptions = {}): T {
  checkDirOutput(path, options);
  mkdirSync(dirname(resolve(path)), { recursive: true });
  const temp = temporarySibling(path);
  mkdirSync(temp);
  let result: T;
  try {
    result = fill(temp);
    if (result instanceof Promise) throw new AppError(ErrorCode.INTERNAL, 'writeDirAtomic: fill must be synchronous (use writeDirAtomicAsync)');
    replaceDir(temp, path);
  } catch (error) {
    rmSync(temp, { recursive: true, force: true });
    throw error;
  }
  return result;
}

/** writeDirAtomic with an asynchronous `fill`. */
export async function writeDirAtomicAsync<T>(path: string, fill: (dir: string) => Promise<T>, options: OutputOptions = {}): Promise<T> {
  checkDirOutput(path, options);
  mkdirSync(dirname(resolve(path)), { recursive: true });
  const temp = temporarySibling(path);
  mkdirSync(temp);
  try {
    const result = await fill(temp);
    replaceDir(temp, path);
    return result;
  } catch (error) {
    rmSync(temp, { recursive: true, force: true });
    throw error;
  }
}

/** Move the finished `temp` to `path`, replacing a directory there (moved aside first, restored if the move fails). */
function replaceDir(temp: string, path: string): void {
  if (!existsSync(path)) {
    renameSync(temp, path);
    return;
  }
  const old = temporarySibling(path, 'old');
  renameSync(path, old);
  try {
    renameSync(temp, path);
  } catch (error) {
    renameSync(old, path);
    throw error;
  }
  rmSync(old, { recursive: true, force: true });
}
