import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { listeningUrlOf } from '@sqlenv/model-server';

/** The `sqlenv` bin, run as a user would. */
export const SQLENV_BIN = join(import.meta.dirname, '..', 'apps', 'cli', 'bin', 'sqlenv.js');

export interface ServeModelProcess {
  child: ChildProcess;
  url: string;
  port: number;
  logs: string[];
  /** Resolves with the exit code and signal once the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stop(): Promise<void>;
}

/** Start `sqlenv serve-model` with these flags and wait until it listens (its URL from its log line). */
export async function startServeModel(args: readonly string[], env: Record<string, string> = {}): Promise<ServeModelProcess> {
  const child = spawn(process.execPath, [SQLENV_BIN, 'serve-model', ...args], { env: { ...process.env, LOG_LEVEL: 'info', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const logs: string[] = [];
  child.stderr?.on('data', (d: Buffer) => logs.push(d.toString('utf8')));
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve-model did not start: ${logs.join('')}`)), 180_000);
    lines.on('line', (line) => {
      logs.push(line);
      const listening = listeningUrlOf(line);
      if (listening !== undefined) {
        clearTimeout(timer);
        resolve(listening);
      }
    });
    void exited.then(() => reject(new Error(`serve-model exited early: ${logs.join('\n')}`)));
  });
  return {
    child,
    url,
    port: Number(new URL(url).port),
    logs,
    exited,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

/** Run `sqlenv ARGS` to the end. */
export function runSqlenv(args: readonly string[], env: Record<string, string> = {}, timeoutMs = 240_000): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [SQLENV_BIN, ...args], { env: { ...process.env, ...env }, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout, stderr });
    });
  });
}

/** Requests to `route` the server answered 200 (its Prometheus counter). */
export async function answeredRequests(url: string, route: '/v1/completions' | '/v1/load_lora_adapter'): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`sqlenv_model_server_requests_total{route="${route}",status="200"}`));
  return line === undefined ? 0 : Number(line.split(' ').at(-1));
}
