import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, lstatSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, unlinkSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { z } from 'zod';
import { AppError, ErrorCode, writeFileAtomic } from '@sqlenv/shared';
import { readJsonFile } from './json-file.ts';
import { RUN_COMMAND_FILE, RUN_LOCK_FILE, RUN_SPEC_FILE } from './run-files.ts';

/**
 * A run directory belongs to one run (docs/run-directory.md, "Ownership"). `learn`, `train` and
 * `sft` claim theirs before writing anything:
 *
 * - in use: `run.lock` names the owner (pid, host, command). A lock whose pid is gone on this host is
 *   stale and taken over; a live one (or one from another host, which cannot be checked) is refused.
 * - another run: a directory holding anything but a stale lock is refused, unless `resume` (continue
 *   the run it holds, which must be one of the same command) or `force` (replace it: the new
 *   directory is made first, holding the lock, and only then is the old one moved aside and removed).
 *
 * `command.json` records which command made the run, its run id and its options, so a `--resume`
 * continues with the run's own settings.
 */

export type ClaimMode = 'new' | 'resume' | 'force';

export const RunLockSchema = z.object({ pid: z.number().int(), host: z.string(), command: z.string(), started_at: z.string() });
export type RunLock = z.infer<typeof RunLockSchema>;

export const RunCommandSchema = z.object({
  schema_version: z.literal(1),
  /** The command that made the run (learn, train). */
  command: z.string(),
  run_id: z.string(),
  created_at: z.string(),
  /** The command's parsed options, so --resume continues with them. */
  options: z.record(z.string(), z.unknown()),
});
export type RunCommand = z.infer<typeof RunCommandSchema>;

export interface RunDirClaim {
  /** The run directory, resolved. */
  readonly dir: string;
  /** The run it holds (command.json) when resumed; undefined for a new or replaced one. */
  readonly resumed: RunCommand | undefined;
  /** Remove the lock (idempotent; also done when the process exits). */
  release(): void;
}

export interface ClaimOptions {
  mode: ClaimMode;
  /** The claiming command (written in the lock; a resume must find a run of the same command). */
  command: string;
  /** How the directory is named in messages (a flag). */
  label?: string;
}

/**
 * Claim `dir` for one run, before anything is written into it; throws VALIDATION with the reason
 * (in use, holds another run, nothing to resume) and writes nothing then.
 */
export function claimRunDir(path: string, options: ClaimOptions): RunDirClaim {
  const dir = resolve(path);
  const label = `${options.label ?? 'run directory'} ${path}`;
  if (existsSync(dir) && !lstatSync(dir).isDirectory()) throw new AppError(ErrorCode.VALIDATION, `${label} exists and is not a directory`);
  const lockPath = join(dir, RUN_LOCK_FILE);
  checkNotInUse(lockPath, label);
  const contents = existsSync(dir) ? readdirSync(dir).filter((name) => name !== RUN_LOCK_FILE) : [];
  const held = contents.length === 0 ? undefined : describeHeldRun(dir);
  if (options.mode === 'resume') {
    const command = readRunCommand(dir);
    if (command === undefined) throw new AppError(ErrorCode.VALIDATION, `--resume: ${label} holds no run to continue (no ${RUN_COMMAND_FILE})`);
    if (command.command !== options.command) throw new AppError(ErrorCode.VALIDATION, `--resume: ${label} holds a run of sqlenv ${command.command}, not of sqlenv ${options.command}`);
    return { dir, resumed: command, release: acquireLock(lockPath, options.command, label) };
  }
  if (contents.length === 0 || options.mode === 'new') {
    if (contents.length > 0) {
      throw new AppError(ErrorCode.VALIDATION, `${label} holds ${held}: pass --resume to continue it, --force to replace it, or choose another directory`);
    }
    mkdirSync(dir, { recursive: true });
    return { dir, resumed: undefined, release: acquireLock(lockPath, options.command, label) };
  }
  // --force over a run: the new directory exists (and is locked) before the old one is moved aside.
  const fresh = join(dirname(dir), `.${basename(dir)}.${randomBytes(6).toString('hex')}.new`);
  mkdirSync(fresh);
  const releaseFresh = acquireLock(join(fresh, RUN_LOCK_FILE), options.command, label);
  const aside = join(dirname(dir), `.${basename(dir)}.${randomBytes(6).toString('hex')}.replaced`);
  try {
    renameSync(dir, aside);
    renameSync(fresh, dir);
  } catch (error) {
    releaseFresh();
    if (!existsSync(dir) && existsSync(aside)) renameSync(aside, dir);
    rmSync(fresh, { recursive: true, force: true });
    throw error;
  }
  releaseFresh();
  rmSync(aside, { recursive: true, force: true });
  return { dir, resumed: undefined, release: acquireLock(lockPath, options.command, label) };
}

/** The run a directory holds, as messages name it: its run id and command, else what is in it. */
function describeHeldRun(dir: string): string {
  const command = readRunCommand(dir);
  if (command !== undefined) return `run ${command.run_id} (sqlenv ${command.command}, started ${command.created_at})`;
  const specPath = join(dir, RUN_SPEC_FILE);
  if (existsSync(specPath)) {
    try {
      return `run ${String((JSON.parse(readFileSync(specPath, 'utf8')) as { run_id?: unknown }).run_id)}`;
    } catch {
      // An unreadable run.json is still somebody's run.
    }
  }
  return 'files of another run';
}

/** `command.json` of a run directory (undefined when there is none); throws VALIDATION when it is unreadable. */
export function readRunCommand(dir: string): RunCommand | undefined {
  return readJsonFile(join(dir, RUN_COMMAND_FILE), RunCommandSchema, () => "not a run's command file");
}

/** Record the command, run id and options of a new run (what --resume reads back). */
export function writeRunCommand(dir: string, command: string, runId: string, options: Record<string, unknown>): RunCommand {
  const record: RunCommand = { schema_version: 1, command, run_id: runId, created_at: new Date().toISOString(), options };
  writeFileAtomic(join(dir, RUN_COMMAND_FILE), `${JSON.stringify(record, null, 2)}\n`);
  return record;
}

/** Refuse a lock held by a live process (or by another host, which cannot be checked). */
function checkNotInUse(lockPath: string, label: string): void {
  const lock = readLock(lockPath);
  if (lock === undefined || !lockIsLive(lock)) return;
  const where = lock.host === hostname() ? '' : ` on host ${lock.host} (if that process is gone, delete ${lockPath})`;
  throw new AppError(ErrorCode.VALIDATION, `${label} is in use by sqlenv ${lock.command} (pid ${lock.pid}${where}, since ${lock.started_at}); wait for it to end or stop it`);
}

function readLock(lockPath: string): RunLock | undefined {
  if (!existsSync(lockPath)) return undefined;
  try {
    const parsed = RunLockSchema.safeParse(JSON.parse(readFileSync(lockPath, 'utf8')));
    // A lock cut short (its writer killed mid-write) has no owner to wait for.
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** Whether the lock's owner still runs: another host's lock is taken as live. */
export function lockIsLive(lock: RunLock): boolean {
  if (lock.host !== hostname()) return true;
  if (lock.pid === process.pid) return true;
  try {
    process.kill(lock.pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Create the lock exclusively (O_EXCL: of two processes claiming at once, one wins), replacing a
 * stale one. Returns its release, also run when the process exits.
 */
export function acquireLock(lockPath: string, command: string, label: string): () => void {
  const lock: RunLock = { pid: process.pid, host: hostname(), command, started_at: new Date().toISOString() };
  const existing = readLock(lockPath);
  if (existsSync(lockPath) && (existing === undefined || !lockIsLive(existing) || existing.pid === process.pid)) unlinkSync(lockPath);
  let fd: number;
  try {
    fd = openSync(lockPath, 'wx');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    checkNotInUse(lockPath, label);
    throw new AppError(ErrorCode.VALIDATION, `${label} is being claimed by another process; try again`);
  }
  try {
    writeSync(fd, `${JSON.stringify(lock)}\n`);
  } finally {
    closeSync(fd);
  }
  let released = false;
  const release = (): void => {
    if (released) return;
    released = true;
    process.off('exit', release);
    // Only our own lock: a --force elsewhere may have replaced the directory.
    if (readLock(lockPath)?.pid === process.pid) rmSync(lockPath, { force: true });
  };
  process.on('exit', release);
  return release;
}
