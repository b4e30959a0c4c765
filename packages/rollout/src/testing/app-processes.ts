import { fork, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Helpers of the multi-process rollout tests: spawn the apps' real main.ts as
 * child processes (tsx loader), capture their output, wait for them.
 */
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');

export interface AppProcess {
  name: string;
  child: ChildProcess;
  /** Resolves with the exit code (or the signal name) once the process is gone. */
  exited: Promise<number | string>;
  stdout(): string;
  logFile: string;
}

export const logDir = mkdtempSync(path.join(tmpdir(), 'sqlenv-rollout-test-'));

export function startApp(app: 'coordinator' | 'worker' | 'trainer', name: string, args: string[], env: Record<string, string>): AppProcess {
  const logFile = path.join(logDir, `${name}.log`);
  const log = createWriteStream(logFile);
  const child = fork(path.join(root, 'apps', app, 'src', 'main.ts'), args, {
    execArgv: ['--import', 'tsx'],
    cwd: root,
    env: { ...process.env, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  let stdout = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    stdout += chunk.toString('utf8');
  });
  child.stderr?.pipe(log);
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? -1)));
  return { name, child, exited, stdout: () => stdout, logFile };
}

/** Last lines of an app's log, for a failing test's message. */
export function logTail(app: AppProcess, lines = 30): string {
  try {
    return `--- ${app.name} ---\n${readFileSync(app.logFile, 'utf8').split('\n').slice(-lines).join('\n')}`;
  } catch {
    return `--- ${app.name}: no log ---`;
  }
}

export async function waitFor(condition: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

export async function stopAll(apps: readonly AppProcess[]): Promise<void> {
  for (const app of apps) if (app.child.exitCode === null && app.child.signalCode === null) app.child.kill('SIGTERM');
  await Promise.race([Promise.all(apps.map((a) => a.exited)), new Promise((resolve) => setTimeout(resolve, 10_000))]);
  for (const app of apps) if (app.child.exitCode === null && app.child.signalCode === null) app.child.kill('SIGKILL');
}
