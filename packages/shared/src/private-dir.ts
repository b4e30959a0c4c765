/**
 * Directories and files that this process trusts: code it executes (the SQL
 * executor child's bundle) and data it scores with (gold answers). Under a
 * shared temporary directory any local user can create a name first — a
 * directory they own, a symlink — so every such path is checked before use:
 *
 * - a directory must be a real directory (not a symlink, unless the caller
 *   names it itself), owned by this user (or root, who could do anything
 *   anyway) and writable by nobody else; one we create is 0700;
 * - a file is written under a random name with exclusive creation (O_EXCL
 *   fails on anything already there, a symlink included, so a planted link
 *   cannot redirect the write), then renamed into place (rename replaces a
 *   symlink at the target instead of following it);
 * - a file is read without following a symlink, and only when it is a
 *   regular file with the same owner rule and no group/world write bit.
 *
 * A path that fails a check is refused with AppError UNSAFE_PATH, whose
 * message says what is wrong and what to do.
 */
import { randomBytes } from 'node:crypto';
import { closeSync, constants, fstatSync, lstatSync, mkdirSync, openSync, readFileSync, realpathSync, renameSync, rmSync, statSync, writeSync, type Stats } from 'node:fs';
import { join } from 'node:path';
import { AppError, ErrorCode } from './app-error.ts';

/** Group or world may write. */
const SHARED_WRITE_BITS = 0o022;

/** This process's uid, or undefined where there are none (Windows: the checks do not apply there). */
function currentUid(): number | undefined {
  return typeof process.getuid === 'function' ? process.getuid() : undefined;
}

/** Why a file or directory with these stats may not be trusted, or undefined when it may. */
function ownershipProblem(info: Stats, uid: number | undefined): string | undefined {
  if (uid === undefined) return undefined;
  if (info.uid !== uid && info.uid !== 0) return `it is owned by uid ${info.uid}, not by this user (uid ${uid})`;
  if ((info.mode & SHARED_WRITE_BITS) !== 0) return `it is writable by group or others (mode ${(info.mode & 0o777).toString(8).padStart(3, '0')})`;
  return undefined;
}

function unsafe(problem: string, advice: string, path: string): AppError {
  return new AppError(ErrorCode.UNSAFE_PATH, `refusing to use ${path}: ${problem}; ${advice}`, { details: { path } });
}

export interface PrivateDirOptions {
  /**
   * Accept a symlink at `path` (checking where it leads): for a directory
   * the operator named (a configured cache directory may be a link). Never
   * for a name under a shared temporary directory.
   */
  followSymlink?: boolean;
  /** Said after the problem in the error message: how to fix it. */
  advice?: string;
}

/**
 * Create `path` (and missing parents) with mode 0700, or check the directory
 * already there: a directory, owned by this user (or root), not writable by
 * group or others. Returns `path`. Throws UNSAFE_PATH otherwise.
 */
export function ensurePrivateDir(path: string, options: PrivateDirOptions = {}): string {
  const advice = options.advice ?? 'another user may have created it to plant files there; remove it, or choose another directory';
  try {
    mkdirSync(path, { recursive: true, mode: 0o700 });
  } catch (error) {
    // EEXIST: a file or a dangling symlink is in the way; the checks below say which.
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  let info: Stats;
  try {
    info = lstatSync(path);
    if (info.isSymbolicLink()) {
      if (options.followSymlink !== true) throw unsafe('it is a symbolic link', advice, path);
      info = statSync(realpathSync(path));
    }
  } catch (error) {
    if (error instanceof AppError) throw error;
    throw unsafe(`it cannot be inspected (${(error as Error).message})`, advice, path);
  }
  if (!info.isDirectory()) throw unsafe('it is not a directory', advice, path);
  const problem = ownershipProblem(info, currentUid());
  if (problem !== undefined) throw unsafe(problem, advice, path);
  return path;
}

/**
 * Read a file without following a symlink, if it is a regular file owned by
 * this user (or root) and not writable by group or others; `secret: true`
 * also requires no group/world access at all (a key). Returns undefined when
 * there is no file; throws UNSAFE_PATH when there is one that fails a check.
 */
export function readTrustedFile(path: string, options: { secret?: boolean } = {}): Buffer | undefined {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    if (code === 'ELOOP') throw unsafe('it is a symbolic link', 'remove it', path);
    throw error;
  }
  try {
    const info = fstatSync(fd);
    if (!info.isFile()) throw unsafe('it is not a regular file', 'remove it', path);
    const problem = ownershipProblem(info, currentUid());
    if (problem !== undefined) throw unsafe(problem, 'remove it', path);
    if (options.secret === true && currentUid() !== undefined && (info.mode & 0o077) !== 0) {
      throw unsafe(`it holds a secret but others may read it (mode ${(info.mode & 0o777).toString(8)})`, 'remove it (a new one is made)', path);
    }
    return readFileSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** A fresh, unguessable name for a file being written in `dir`. */
function tempPath(dir: string, name: string): string {
  return join(dir, `.${name}.${randomBytes(12).toString('hex')}.tmp`);
}

/**
 * Write `data` to a new file in `dir` (which the caller has checked with
 * ensurePrivateDir) under an unguessable temporary name, created exclusively
 * with `mode`. Returns its path; the caller renames or links it into place.
 * `temp` replaces the random name (tests: a name where a symlink is planted).
 */
export function writeExclusiveTemp(dir: string, name: string, data: string | Uint8Array, mode: number, temp = tempPath(dir, name)): string {
  // 'wx' = O_CREAT | O_EXCL: fails on any existing entry, a dangling symlink included.
  const fd = openSync(temp, 'wx', mode);
  try {
    const bytes = typeof data === 'string' ? Buffer.from(data) : data;
    for (let at = 0; at < bytes.length; ) at += writeSync(fd, bytes, at);
  } catch (error) {
    closeSync(fd);
    rmSync(temp, { force: true });
    throw error;
  }
  closeSync(fd);
  return temp;
}

/**
 * Write `data` to `dir/name` atomically: a concurrent reader sees the old
 * file or the whole new one, and a symlink at either path redirects nothing
 * (see the header). `mode` defaults to 0600.
 */
export function writePrivateFile(dir: string, name: string, data: string | Uint8Array, mode = 0o600): string {
  const target = join(dir, name);
  const temp = writeExclusiveTemp(dir, name, data, mode);
  try {
    renameSync(temp, target);
  } catch (error) {
    rmSync(temp, { force: true });
    throw error;
  }
  return target;
}
