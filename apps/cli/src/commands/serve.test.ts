import { describe, expect, it } from 'vitest';
import { AppError } from '@sqlenv/shared';
import type { CommandIo } from '../io.ts';
import { parseServeConfig, serveCommand } from './serve.ts';

describe('parseServeConfig', () => {
  it('defaults to loopback:8000, builtin data, 1,024 sessions, no auth', () => {
    const config = parseServeConfig([], {});
    expect(config !== 'help' && config.apiKey).toBeUndefined();
    expect(config).toMatchObject({
      port: 8000,
      host: '127.0.0.1',
      dataset: 'builtin',
      maxSessions: 1024,
      maxFrameBytes: 1024 * 1024,
      web: true,
      mode: 'eval',
      allowedHosts: [],
    });
  });

  it('--mode / SQLENV_MODE picks the reward clients see; --allowed-hosts / SQLENV_ALLOWED_HOSTS takes a comma list', () => {
    expect(parseServeConfig(['--mode', 'train'], {})).toMatchObject({ mode: 'train' });
    expect(parseServeConfig([], { SQLENV_MODE: 'train' })).toMatchObject({ mode: 'train' });
    expect(() => parseServeConfig(['--mode', 'play'], {})).toThrow(/mode/);
    expect(parseServeConfig(['--allowed-hosts', 'env-server, Sqlenv.Example,,'], {})).toMatchObject({ allowedHosts: ['env-server', 'sqlenv.example'] });
    expect(parseServeConfig(['--allowed-hosts', '*'], { SQLENV_ALLOWED_HOSTS: 'a,b' })).toMatchObject({ allowedHosts: ['*'] });
    expect(parseServeConfig([], { SQLENV_ALLOWED_HOSTS: 'a,b' })).toMatchObject({ allowedHosts: ['a', 'b'] });
  });

  it('reads the Docker env vars, and flags win over them', () => {
    const env = { PORT: '9000', HOST: '0.0.0.0', SQLENV_API_KEY: 'k', SQLENV_MAX_SESSIONS: '8', SQLENV_WEB: '0', SQLENV_IDLE_TIMEOUT_S: '30' };
    expect(parseServeConfig([], env)).toMatchObject({ port: 9000, host: '0.0.0.0', apiKey: 'k', maxSessions: 8, web: false, idleTimeoutS: 30 });
    const flagged = parseServeConfig(['--port', '8100', '--max-sessions', '2', '--api-key', 'other', '--dataset', 'some/dir'], env);
    expect(flagged).toMatchObject({ port: 8100, maxSessions: 2, apiKey: 'other', dataset: 'some/dir', host: '0.0.0.0' });
    expect(parseServeConfig(['--no-web'], {})).toMatchObject({ web: false });
    expect(parseServeConfig([], { SQLENV_API_KEY: '' })).not.toHaveProperty('apiKey');
    expect(parseServeConfig([], { SQLENV_EXECUTOR_POOL_SIZE: '3', SQLENV_EXECUTOR_IN_PROCESS_MAX_MS: '0' })).toMatchObject({ executorPoolSize: 3, executorInProcessMaxMs: 0 });
    expect(() => parseServeConfig([], { SQLENV_EXECUTOR_IN_PROCESS_MAX_MS: '-1' })).toThrow(/executorInProcessMaxMs/);
  });

  it('fails fast naming the bad value', () => {
    expect(() => parseServeConfig(['--port', 'eighty'], {})).toThrow(AppError);
    expect(() => parseServeConfig(['--max-sessions', '0'], {})).toThrow(/maxSessions/);
    expect(() => parseServeConfig([], { PORT: '70000' })).toThrow(/port/);
    expect(() => parseServeConfig(['--bogus'], {})).toThrow();
  });

  it('serveCommand prints usage for --help and exits 2 on bad flags', async () => {
    const out: string[] = [];
    const err: string[] = [];
    const io = { env: {}, stdout: { write: (t: string) => out.push(t) > 0 }, stderr: { write: (t: string) => err.push(t) > 0 } } as unknown as CommandIo;
    expect(await serveCommand(['--help'], io)).toBe(0);
    expect(out.join('')).toMatch(/sqlenv serve/);
    expect(await serveCommand(['--port', 'x'], io)).toBe(2);
    expect(err.join('')).toMatch(/port/);
  });
});
