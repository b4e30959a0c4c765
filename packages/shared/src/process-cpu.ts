import { readFileSync } from 'node:fs';

/**
 * User + system CPU time a process has used so far, in ms (Linux /proc,
 * where USER_HZ is 100, so 10 ms steps), or undefined where it cannot be
 * read (the process is gone, or this is not Linux).
 */
export function processCpuMs(pid: number): number | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The fields after the parenthesised command name (which may itself
    // contain ") "): state ppid ... utime (14th) stime (15th).
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    return Number.isFinite(ticks) ? ticks * 10 : undefined;
  } catch {
    return undefined;
  }
}
