import { request } from 'node:http';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Logger } from '@sqlenv/shared';
import type { SqlEnvRuntime } from '@sqlenv/sql-env';
import { SQLEnvClient } from '@sqlenv/client';
import { parseServeConfig } from '@sqlenv/cli';
import { startServer, type RunningServer } from '@sqlenv/env-server';
import { RawWs, startHarness, type Harness, type OracleEpisode, startTestServer, type TestServer } from '@sqlenv/env-server/testing';

// What the server promises a machine it runs on: browsers on other sites cannot drive it (Host and
// Origin allow-list), an evaluated client cannot probe the gold answer through the reward, and
// /step refuses requests it would otherwise misread.

let runtime: SqlEnvRuntime;
let oracle: OracleEpisode;
let server: TestServer | undefined;
let harness: Harness;
let port: number;

beforeAll(async () => {
  ({ runtime, harness, oracle } = server = await startTestServer());
  port = Number(new URL(harness.baseUrl).port);
});

afterAll(() => server?.close());

/** A raw HTTP request (fetch may not set Host): status and body text. */
function raw(base: string, method: string, path: string, headers: Record<string, string>, body?: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(`${base}${path}`, { method, headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('Host and Origin allow-list', () => {
  it('HTTP: a DNS-rebinding Host is refused with 403; loopback names and IP literals, any port, are served', async () => {
    for (const host of [`evil.example:${port}`, 'evil.example', `localhost.evil.example:${port}`]) {
      const refused = await raw(harness.baseUrl, 'GET', '/web/catalog', { host });
      expect(refused.status, host).toBe(403);
      expect(refused.text).toMatch(/--allowed-hosts/);
    }
    expect((await raw(harness.baseUrl, 'POST', '/reset', { host: `evil.example:${port}` }, '{}')).status).toBe(403);
    for (const host of [`localhost:${port}`, 'localhost', `127.0.0.1:${port}`, `[::1]:${port}`, 'LocalHost.:1', `app.localhost:${port}`, `192.168.1.5:${port}`]) {
      expect((await raw(harness.baseUrl, 'GET', '/health', { host })).status, host).toBe(200);
    }
  });

  it('HTTP: a foreign page cannot post to the server (Origin refused); the server\'s own pages can', async () => {
    const foreign = await raw(harness.baseUrl, 'POST', '/reset', { origin: 'https://evil.example' }, '{}');
    expect(foreign.status).toBe(403);
    expect(foreign.text).toMatch(/Origin 'https:\/\/evil.example' is not allowed/);
    expect((await raw(harness.baseUrl, 'POST', '/reset', { origin: 'null' }, '{}')).status).toBe(403);
    // A page served by another machine by IP is someone else's page, even though an IP Host is fine.
    expect((await raw(harness.baseUrl, 'POST', '/reset', { origin: 'http://192.168.1.9:8000' }, '{}')).status).toBe(403);
    const own = await raw(harness.baseUrl, 'POST', '/reset', { origin: harness.baseUrl }, '{}');
    expect(own.status).toBe(200);
    const byIp = await raw(harness.baseUrl, 'POST', '/close', { host: `10.1.2.3:${port}`, origin: `http://10.1.2.3:${port}`, 'x-session-id': String((JSON.parse(own.text) as { session_id: string }).session_id) }, '{}');
    expect(byIp.status).toBe(200);
  });

  it('WebSocket: a browser Origin from another site is refused at the handshake; clients without Origin and the own origin are served', async () => {
    await expect(RawWs.open(harness.wsUrl, { headers: { origin: 'https://evil.example' } })).rejects.toThrow(/403/);
    await expect(RawWs.open(harness.wsUrl, { headers: { host: `evil.example:${port}`, origin: `http://evil.example:${port}` } })).rejects.toThrow(/403/);
    // Non-browser clients (the OpenEnv Python client, TRL, this one) send no Origin, whatever name they use.
    const plain = await RawWs.open(harness.wsUrl, { headers: { host: `env-server:${port}` } });
    expect((await plain.request({ type: 'state' }))['type']).toBe('state');
    const own = await RawWs.open(harness.wsUrl, { headers: { origin: `http://localhost:${port}` } });
    expect((await own.request({ type: 'state' }))['type']).toBe('state');
    plain.close();
    own.close();
  });

  it('--allowed-hosts adds names (.name: with subdomains), and * allows any host', async () => {
    const named = await startHarness(runtime, { allowedHosts: ['sqlenv.example', '.corp.example'] });
    const open = await startHarness(runtime, { allowedHosts: ['*'] });
    try {
      for (const host of ['sqlenv.example:8000', 'SQLENV.example', 'corp.example', 'a.b.corp.example:443']) expect((await raw(named.baseUrl, 'GET', '/health', { host })).status, host).toBe(200);
      for (const host of ['evil.example', 'sqlenv.example.evil.example', 'xcorp.example']) expect((await raw(named.baseUrl, 'GET', '/health', { host })).status, host).toBe(403);
      const ws = await RawWs.open(named.wsUrl, { headers: { origin: 'https://sqlenv.example' } });
      expect((await ws.request({ type: 'state' }))['type']).toBe('state');
      ws.close();
      expect((await raw(open.baseUrl, 'GET', '/health', { host: 'evil.example', origin: 'https://evil.example' })).status).toBe(200);
    } finally {
      await named.close();
      await open.close();
    }
  });
});

describe('evaluation mode: only the terminal reward reaches the client', () => {
  /** A question whose gold answer is one integer, so `SELECT <n>` is a probe of the answer. */
  function integerQuestion(): { questionId: string; answer: number } {
    for (const q of runtime.dataset.questions) {
      const cell = q.gold_rows.length === 1 && q.gold_rows[0]?.length === 1 ? q.gold_rows[0][0] : undefined;
      if (typeof cell === 'number' && Number.isInteger(cell) && cell > 1) return { questionId: q.question_id, answer: cell };
    }
    throw new Error('dataset has no single-integer question');
  }

  /** Rewards of QUERY `SELECT <gold>` and `SELECT <gold - 1>`, each on a fresh episode, then a correct ANSWER. */
  async function probe(baseUrl: string): Promise<{ right: number | null; wrong: number | null; answer: number | null; total: number }> {
    const { questionId, answer } = integerQuestion();
    const client = await SQLEnvClient.connect(baseUrl);
    try {
      await client.reset({ question_id: questionId });
      const wrong = (await client.step({ action_type: 'QUERY', argument: `SELECT ${answer - 1}` })).reward;
      await client.reset({ question_id: questionId });
      const right = (await client.step({ action_type: 'QUERY', argument: `SELECT ${answer}` })).reward;
      const answered = (await client.step({ action_type: 'ANSWER', argument: String(answer) })).reward;
      return { right, wrong, answer: answered, total: (await client.state()).total_reward };
    } finally {
      await client.close();
    }
  }

  it('train mode (the shaped reward RL needs) pays more for a query that returns the gold answer: the leak eval mode closes', async () => {
    const { right, wrong } = await probe(harness.baseUrl);
    expect(right).toBeGreaterThan(wrong ?? 0);
  });

  it('`sqlenv serve` defaults to eval mode: QUERY SELECT <gold> and SELECT <gold - 1> earn the same 0; the answer earns 1; the shaping is logged', async () => {
    const config = parseServeConfig(['--port', '0', '--dataset', process.env['SPIDER_DIR'] ?? 'builtin', '--cache-dir', join(tmpdir(), 'sqlenv-test-cache')], {});
    if (config === 'help') throw new Error('unexpected help');
    const logged = captureLogger();
    let served: RunningServer | undefined;
    try {
      served = await startServer(config, logged.logger);
      const { right, wrong, answer, total } = await probe(`http://127.0.0.1:${served.address.port}`);
      expect(right).toBe(0);
      expect(wrong).toBe(0);
      expect(answer).toBe(1);
      expect(total).toBe(1);
      expect(config.mode).toBe('eval');
      // The server still computed the shaping, and its log shows what the client was not told.
      const steps = logged.records.filter((r) => r['msg'] === 'step reward');
      expect(steps.map((r) => (r['rewardBreakdown'] as { progress: number }).progress).some((p) => p > 0)).toBe(true);
      expect(logged.records.find((r) => r['msg'] === 'env server listening')).toMatchObject({ rewardMode: 'eval' });
    } finally {
      await served?.server.close();
    }
  });
});

/** A logger that keeps every record (debug included) with its bindings, for assertions on what the server logs. */
function captureLogger(): { logger: Logger; records: Array<Record<string, unknown>> } {
  const records: Array<Record<string, unknown>> = [];
  const make = (bindings: Record<string, unknown>): Logger => {
    const write = (obj: unknown, msg?: string): void => {
      records.push(typeof obj === 'string' ? { ...bindings, msg: obj } : { ...bindings, ...(obj as Record<string, unknown>), msg });
    };
    const logger = {
      level: 'debug',
      isLevelEnabled: () => true,
      child: (more: Record<string, unknown>) => make({ ...bindings, ...more }),
      flush: (cb?: () => void) => cb?.(),
      fatal: write,
      error: write,
      warn: write,
      info: write,
      debug: write,
      trace: write,
    };
    return logger as unknown as Logger;
  };
  return { logger: make({}), records };
}

describe('strict HTTP /step', () => {
  async function post(path: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; json: Record<string, unknown> }> {
    const res = await fetch(`${harness.baseUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
    return { status: res.status, json: (await res.json()) as Record<string, unknown> };
  }

  it('rejects unknown top-level keys, naming the key and the accepted ones; the stock fields still pass', async () => {
    const sessionId = String((await post('/reset', { question_id: oracle.questionId })).json['session_id']);
    const headers = { 'x-session-id': sessionId };
    const typo = await post('/step', { action: { action_type: 'DESCRIBE', argument: oracle.tables[0] }, sesion_id: sessionId });
    expect(typo.status).toBe(422);
    expect(JSON.stringify(typo.json['detail'])).toMatch(/sesion_id.*accepts action, timeout_s, request_id, session_id/);
    const stock = await post('/step', { action: { action_type: 'DESCRIBE', argument: oracle.tables[0] }, timeout_s: 5, request_id: 'r-1' }, headers);
    expect(stock.status).toBe(200);
    expect((stock.json['observation'] as { step_count: number }).step_count).toBe(1);
    await post('/close', {}, headers);
  });

  it('rejects a body session_id that contradicts the X-Session-Id header (400), accepts the same id in both', async () => {
    const a = String((await post('/reset', {})).json['session_id']);
    const b = String((await post('/reset', {})).json['session_id']);
    const step = { action: { action_type: 'DESCRIBE', argument: oracle.tables[0] } };
    const conflict = await post('/step', { ...step, session_id: a }, { 'x-session-id': b });
    expect(conflict.status).toBe(400);
    expect(String(conflict.json['detail'])).toMatch(new RegExp(`Conflicting session ids: body session_id '${a}' but X-Session-Id header '${b}'`));
    const same = await post('/step', { ...step, session_id: a }, { 'x-session-id': a });
    expect(same.status).toBe(200);
    expect((await fetch(`${harness.baseUrl}/state?session_id=${a}`, { headers: { 'x-session-id': b } })).status).toBe(400);
    for (const id of [a, b]) await post('/close', { session_id: id });
  });
});
