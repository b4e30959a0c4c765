import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { trainerCommand } from '@sqlenv/cli';
import { freePort } from '@sqlenv/rollout/testing';

/**
 * `--metrics-port` serves /status (which shows run specs) without credentials, so it binds loopback
 * unless `--metrics-host` / SQLENV_METRICS_HOST says otherwise (docs/security.md, "Metrics endpoint").
 * A trainer command in this process, asked on 127.0.0.1 and on another loopback address.
 */
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';

/**
 * Another address of this machine that a loopback-only bind does not answer on: 127.0.0.2 (the whole of
 * 127.0.0.0/8 reaches the loopback interface, but a socket bound to 127.0.0.1 accepts only that
 * address, while one bound to 0.0.0.0 accepts every address of the machine). The test tells a
 * loopback bind from a wide one without sending anything off the loopback range.
 */
const OTHER_ADDRESS = '127.0.0.2';

async function reachable(host: string, port: number): Promise<boolean> {
  try {
    return (await fetch(`http://${host}:${port}/metrics`, { signal: AbortSignal.timeout(3_000) })).ok;
  } catch {
    return false;
  }
}

/** Start a trainer (serving runs, none registered) with the metrics server, probe it, stop it. */
async function probeTrainer(argv: string[], env: Record<string, string>): Promise<{ loopback: boolean; external: boolean }> {
  const port = await freePort();
  const controller = new AbortController();
  let err = '';
  const sink = new Writable({ write: (_c, _e, done) => done() });
  const stderr = new Writable({ write: (chunk: Buffer, _e, done) => ((err += chunk.toString()), done()) });
  const keyBase = `mh-${randomBytes(3).toString('hex')}`;
  const running = trainerCommand(['--metrics-port', String(port), '--log-level', 'silent', '--poll-ms', '50', ...argv], {
    stdout: sink,
    stderr,
    env: { REDIS_URL, SQLENV_KEY_BASE: keyBase, ...env },
    signal: controller.signal,
  });
  try {
    const deadline = Date.now() + 30_000;
    while (!(await reachable('127.0.0.1', port))) {
      if (Date.now() > deadline) throw new Error(`metrics server never answered on loopback: ${err}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return { loopback: true, external: await reachable(OTHER_ADDRESS, port) };
  } finally {
    controller.abort();
    expect(await running, err).toBe(0);
  }
}

describe('the metrics endpoint of a rollout app', () => {
  it('binds 127.0.0.1 by default: not reachable on another address of the machine', async () => {
    expect(await probeTrainer([], {})).toEqual({ loopback: true, external: false });
  }, 60_000);

  it('binds wider when asked, by flag or by SQLENV_METRICS_HOST', async () => {
    expect(await probeTrainer(['--metrics-host', '0.0.0.0'], {})).toEqual({ loopback: true, external: true });
    expect(await probeTrainer([], { SQLENV_METRICS_HOST: '0.0.0.0' })).toEqual({ loopback: true, external: true });
  }, 60_000);
});
