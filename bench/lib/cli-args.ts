/** Flags, timing and the `sqlenv` CLI for bench scripts. */
import { execFile, execFileSync } from 'node:child_process';
import { repoRoot, sqlenvBin } from './repo-paths.ts';

/** `--name N` from the command line, or `fallback`. */
export function numberArg(name: string, fallback: number): number {
  const args = process.argv.slice(2);
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : fallback;
}

/** The value after `flag` on the command line; undefined when the flag is absent or followed by another flag. */
export function stringArg(flag: string): string | undefined {
  const i = process.argv.indexOf(flag);
  const next = i > 0 ? process.argv[i + 1] : undefined;
  return next !== undefined && !next.startsWith('--') ? next : undefined;
}

/** Best wall time of `repeats` runs after `warmUps` untimed ones (shared cores: the minimum is the least disturbed run). */
export async function bestWallMs(run: () => Promise<unknown>, repeats: number, warmUps = 0): Promise<number> {
  for (let i = 0; i < warmUps; i++) await run();
  let best = Number.POSITIVE_INFINITY;
  for (let i = 0; i < repeats; i++) {
    const start = performance.now();
    await run();
    best = Math.min(best, performance.now() - start);
  }
  return best;
}

/** Runs `sqlenv <argv>` to completion (logs at warn) and returns its stdout. */
export function runSqlenv(argv: string[]): string {
  return execFileSync(process.execPath, [sqlenvBin, ...argv], { cwd: repoRoot, encoding: 'utf8', maxBuffer: 64 << 20, env: { ...process.env, LOG_LEVEL: 'warn' } });
}

/** `runSqlenv` without blocking this process: several commands can run at once. */
export function runSqlenvAsync(argv: readonly string[], timeoutMs = 0): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [sqlenvBin, ...argv], { cwd: repoRoot, encoding: 'utf8', maxBuffer: 64 << 20, timeout: timeoutMs, env: { ...process.env, LOG_LEVEL: 'warn' } }, (error, stdout, stderr) => {
      if (error === null) resolve(stdout);
      else reject(new Error(`sqlenv ${argv.join(' ')} failed: ${error.message}\n${stderr.slice(-2000)}`));
    });
  });
}

/** The median (the mean of the two middle values for an even count). */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
}
