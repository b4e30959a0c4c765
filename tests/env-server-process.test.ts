import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SqlEnvRuntime } from '@sqlenv/sql-env';
import { ErrorFrameSchema, ObservationFrameSchema } from '@sqlenv/protocol';
import { RawWs, createTestRuntime, firstOracleEpisode, type OracleEpisode } from '@sqlenv/env-server/testing';

// The server as a real process: the Docker entrypoint (main.ts) configured by env vars,
// a stock-OpenEnv-style Python client against it, and SIGTERM shutdown.

const MAIN = join(import.meta.dirname, '..', 'apps', 'env-server', 'src', 'main.ts');
const CHECK_SCRIPT = join(import.meta.dirname, 'python', 'openenv_client_check.py');

interface ServerProcess {
  child: ChildProcess;
  baseUrl: string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  logs: string[];
}

/** Start main.ts on a free port and wait for its "listening" log line. */
async function startMain(extraEnv: Record<string, string> = {}): Promise<ServerProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', MAIN], {
    env: {
      ...process.env,
      PORT: '0',
      HOST: '127.0.0.1',
      SQLENV_DATASET: process.env['SPIDER_DIR'] ?? 'builtin',
      SQLENV_CACHE_DIR: join(tmpdir(), 'sqlenv-test-cache'),
      LOG_LEVEL: 'info',
      ...extraEnv,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const logs: string[] = [];
  child.stderr?.on('data', (d: Buffer) => logs.push(d.toString('utf8')));
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start: ${logs.join('')}`)), 60_000);
    lines.on('line', (line) => {
      logs.push(line);
      const entry = JSON.parse(line) as { msg?: string; port?: number };
      if (entry.msg === 'env server listening' && entry.port !== undefined) {
        clearTimeout(timer);
        resolve(entry.port);
      }
    });
    void exited.then(() => reject(new Error(`server exited early: ${logs.join('\n')}`)));
  });
  return { child, baseUrl: `http://127.0.0.1:${port}`, exited, logs };
}

let runtime: SqlEnvRuntime;
let oracle: OracleEpisode;
let server: ServerProcess;

beforeAll(async () => {
  // The test reads the gold itself (the server never reveals it).
  runtime = await createTestRuntime();
  oracle = firstOracleEpisode(runtime);
  // Train mode, as a TRL run would start it: the stock client must see the shaped rewards.
  server = await startMain({ SQLENV_MODE: 'train' });
});

afterAll(async () => {
  if (server !== undefined && server.child.exitCode === null) server.child.kill('SIGKILL');
  await runtime?.close();
});

const python = spawnSync('python3', ['--version']).status === 0;

describe('env-server process', () => {
  it.skipIf(!python)('serves the stock OpenEnv client protocol (python, standard library only)', () => {
    const episode = JSON.stringify({ question_id: oracle.questionId, tables: oracle.tables, gold_sql: oracle.goldSql, gold_answer: oracle.goldAnswer });
    // spawnSync is fine: the server is another process, nothing in this one needs to run meanwhile.
    const run = spawnSync('python3', [CHECK_SCRIPT, server.baseUrl, episode], { encoding: 'utf8', timeout: 60_000 });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    const summary = JSON.parse(run.stdout) as { ok: boolean; total_reward: number; close_code: number; state: { question_id: string } };
    expect(summary.ok).toBe(true);
    expect(summary.state.question_id).toBe(oracle.questionId);
    expect(summary.total_reward).toBeGreaterThan(1);
    expect(summary.close_code).toBe(1000);

    const generic = spawnSync('python3', [CHECK_SCRIPT, server.baseUrl], { encoding: 'utf8', timeout: 60_000 });
    expect(generic.status, generic.stderr).toBe(0);
  });

  it('shuts down on SIGTERM: sessions get SESSION_ERROR and close 1001, the process exits 0', async () => {
    const ws = await RawWs.open(`${server.baseUrl.replace('http', 'ws')}/ws`);
    ObservationFrameSchema.parse(await ws.request({ type: 'reset', data: { question_id: oracle.questionId } }));
    server.child.kill('SIGTERM');
    const frame = ErrorFrameSchema.parse(await ws.next(30_000));
    expect(frame.data).toMatchObject({ code: 'SESSION_ERROR', message: 'Server shutting down' });
    expect((await ws.closed).code).toBe(1001);
    expect(await server.exited).toEqual({ code: 0, signal: null });
    await expect(fetch(`${server.baseUrl}/health`)).rejects.toThrow();
  });
});
