/**
 * The machine a bench ran on, one field naming scheme for every results file: what the figures
 * need beside them to be compared (shared cores move them, so the load average is part of the record).
 */
import { execFileSync } from 'node:child_process';
import { availableParallelism, cpus, loadavg, totalmem } from 'node:os';
import { repoRoot } from './repo-paths.ts';

export interface MachineRecord {
  /** When the bench started, ISO 8601 (UTC). */
  startedAt: string;
  cpuModel: string;
  cores: number;
  memoryBytes: number;
  node: string;
  /** 1-minute load average when the bench started and when it wrote its results (null until then). */
  loadAverage1mStart: number;
  loadAverage1mEnd: number | null;
  /** HEAD of the checkout the bench ran from (null outside a git checkout); dirty: uncommitted changes. */
  gitCommit: string | null;
  gitDirty: boolean;
}

const roundLoad = (load: number | undefined): number => Math.round((load ?? 0) * 100) / 100;

/** The 1-minute load average now (a row's own, beside the record's start and end). */
export function loadAverage1mNow(): number {
  return roundLoad(loadavg()[0]);
}

function git(args: readonly string[]): string | null {
  try {
    return execFileSync('git', args, { cwd: repoRoot, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return null;
  }
}

/** Call when the bench starts. */
export function recordMachine(now: Date = new Date()): MachineRecord {
  return {
    startedAt: now.toISOString(),
    cpuModel: cpus()[0]?.model.trim() ?? 'unknown',
    cores: availableParallelism(),
    memoryBytes: totalmem(),
    node: process.version,
    loadAverage1mStart: roundLoad(loadavg()[0]),
    loadAverage1mEnd: null,
    gitCommit: git(['rev-parse', '--short=12', 'HEAD']),
    gitDirty: (git(['status', '--porcelain', '--untracked-files=no']) ?? '') !== '',
  };
}

/** The record with the load average now as its end. */
export function closeMachineRecord(record: MachineRecord): MachineRecord {
  return { ...record, loadAverage1mEnd: roundLoad(loadavg()[0]) };
}

/** The line under a results page's title. */
export function machineLine(record: MachineRecord): string {
  const load = record.loadAverage1mEnd === null ? `${record.loadAverage1mStart} at start` : `${record.loadAverage1mStart} at start, ${record.loadAverage1mEnd} at end`;
  const commit = record.gitCommit === null ? 'no git commit' : `commit ${record.gitCommit}${record.gitDirty ? ' + uncommitted changes' : ''}`;
  const memoryGiB = Math.round(record.memoryBytes / 2 ** 30);
  return `${record.startedAt} · ${record.cpuModel} · ${record.cores} cores (1-min load average ${load}) · ${memoryGiB} GiB · Node ${record.node} · ${commit}`;
}
