/**
 * Plumbing of the benches: flags, best-of-N wall times; and for those that time `sqlenv` commands in
 * child processes, configurations interleaved round by round (sft-vs-torch, threads): running the
 * CLI, medians, the machine line, and writing bench/results/<name>.json and .md.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
export const resultsDir = join(repoRoot, 'bench', 'results');
const sqlenvBin = join(repoRoot, 'apps', 'cli', 'bin', 'sqlenv.js');

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

/** The median (the mean of the two middle values for an even count). */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
}

export interface Machine {
  cpu: string;
  cores: number;
  node: string;
  loadAverageAtStart: number;
}

/** Call at the start of a bench: the CPU, the cores, Node and the 1-minute load average now. */
export function describeMachine(): Machine {
  const load = loadavg()[0] as number;
  return { cpu: cpus()[0]?.model ?? 'unknown', cores: availableParallelism(), node: process.version, loadAverageAtStart: Math.round(load * 100) / 100 };
}

/** The line under a results page's title: date, CPU, cores and load, Node. */
export function machineLine(date: string, machine: Machine): string {
  return `${date} · ${machine.cpu} · ${machine.cores} cores (shared; 1-min load average ${machine.loadAverageAtStart} at start) · Node ${machine.node}`;
}

/** Today as YYYY-MM-DD (UTC). */
export function today(): string {
  return new Date().toISOString().slice(0, 10);
}

/** Writes bench/results/<name>.json and <name>.md. */
export function writeResultFiles(name: string, json: unknown, markdownLines: readonly string[]): void {
  if (!existsSync(resultsDir)) mkdirSync(resultsDir, { recursive: true });
  writeFileSync(join(resultsDir, `${name}.json`), `${JSON.stringify(json, null, 2)}\n`);
  writeFileSync(join(resultsDir, `${name}.md`), markdownLines.join('\n'));
}
