import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SqlEnvRuntime } from '@sqlenv/sql-env';
import { EpisodeStateSchema, HttpStepResponseSchema, StepResultSchema, SqlActionSchema, toJsonSchema } from '@sqlenv/protocol';
import { CatalogDocumentSchema } from '@sqlenv/env-server';
import { RawWs, startHarness, type Harness, type OracleEpisode, startTestServer, type TestServer } from '@sqlenv/env-server/testing';

// The HTTP face of the server: OpenEnv's routes and shapes, plus the session-id extension.

let runtime: SqlEnvRuntime;
let harness: Harness;
let oracle: OracleEpisode;
let server: TestServer | undefined;

beforeAll(async () => {
  ({ runtime, harness, oracle } = server = await startTestServer({ maxSessions: 4 }));
});

afterAll(() => server?.close());

async function post(path: string, body: unknown, headers: Record<string, string> = {}, base = harness.baseUrl): Promise<{ status: number; json: Record<string, unknown>; headers: Headers }> {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown>, headers: res.headers };
}

async function get(path: string, headers: Record<string, string> = {}, base = harness.baseUrl): Promise<{ status: number; text: string; headers: Headers }> {
  const res = await fetch(`${base}${path}`, { headers });
  return { status: res.status, text: await res.text(), headers: res.headers };
}

describe('HTTP: stock OpenEnv routes', () => {
  it('GET /health, /metadata and /schema', async () => {
    expect(JSON.parse((await get('/health')).text)).toEqual({ status: 'healthy' });
    const metadata = JSON.parse((await get('/metadata')).text) as Record<string, unknown>;
    expect(Object.keys(metadata).sort()).toEqual(['author', 'description', 'documentation_url', 'name', 'readme_content', 'version']);
    const schema = JSON.parse((await get('/schema')).text) as Record<string, unknown>;
    expect(Object.keys(schema).sort()).toEqual(['action', 'observation', 'state']);
    expect(schema['action']).toEqual(toJsonSchema(SqlActionSchema));
  });

  it('POST /reset with no body and with stock fields returns {observation, reward: null, done: false}', async () => {
    const empty = await fetch(`${harness.baseUrl}/reset`, { method: 'POST' });
    expect(empty.status).toBe(200);
    const emptyJson = HttpStepResponseSchema.parse(await empty.json());
    expect(emptyJson.reward).toBeNull();
    const seeded = await post('/reset', { seed: 3, episode_id: 'e-1' });
    expect(seeded.status).toBe(200);
    const { session_id: _session, ...stock } = HttpStepResponseSchema.parse(seeded.json);
    expect(StepResultSchema.parse(stock).done).toBe(false);
    for (const id of [emptyJson.session_id, seeded.json['session_id']]) await post('/close', { session_id: id });
  });

  it('POST /step without a session is stateless (a fresh environment has no episode)', async () => {
    const res = await post('/step', { action: { action_type: 'DESCRIBE', argument: oracle.tables[0] } });
    expect(res.status).toBe(409);
    expect(String(res.json['detail'])).toMatch(/reset/);
  });

  it('rejects invalid actions with 422 {"detail": [...]}', async () => {
    const unknownField = await post('/step', { action: { action_type: 'QUERY', argument: 'SELECT 1', extra: true } });
    expect(unknownField.status).toBe(422);
    const detail = unknownField.json['detail'] as { loc: unknown[]; msg: string }[];
    expect(Array.isArray(detail)).toBe(true);
    expect(detail[0]?.loc.slice(0, 2)).toEqual(['body', 'action']);
    expect((await post('/step', { action: { action_type: 'DROP', argument: 'x' } })).status).toBe(422);
    expect((await post('/step', {})).status).toBe(422);
    expect((await post('/step', '{oops')).status).toBe(422);
    expect((await post('/reset', { seed: -1 })).status).toBe(422);
    const unknownQuestion = await post('/reset', { question_id: 'nope' });
    expect(unknownQuestion.status).toBe(422);
    expect(JSON.stringify(unknownQuestion.json['detail'])).toMatch(/unknown question_id/);
  });

  it('GET /state without a session returns a fresh state', async () => {
    const res = await get('/state');
    expect(res.status).toBe(200);
    expect(EpisodeStateSchema.parse(JSON.parse(res.text))).toMatchObject({ episode_id: null, step_count: 0 });
  });

  it('refuses bodies over the limit with 413', async () => {
    const res = await post('/step', { action: { action_type: 'QUERY', argument: 'x'.repeat(1024 * 1024 + 10) } });
    expect(res.status).toBe(413);
  });

  it('answers unknown routes 404 and wrong methods 405', async () => {
    expect((await get('/nope')).status).toBe(404);
    expect((await get('/reset')).status).toBe(405);
  });
});

describe('HTTP: multi-step episodes with session_id', () => {
  it('plays an oracle episode with session_id in the body, the X-Session-Id header and the query', async () => {
    const reset = await post('/reset', { question_id: oracle.questionId });
    expect(reset.status).toBe(200);
    const sessionId = String(reset.json['session_id']);
    expect(reset.headers.get('x-session-id')).toBe(sessionId);
    for (const table of oracle.tables) {
      const step = await post('/step', { action: { action_type: 'DESCRIBE', argument: table }, session_id: sessionId });
      expect(step.status).toBe(200);
      expect(HttpStepResponseSchema.parse(step.json).observation.error).toBe('');
    }
    const query = await post('/step', { action: { action_type: 'QUERY', argument: oracle.goldSql } }, { 'x-session-id': sessionId });
    expect(HttpStepResponseSchema.parse(query.json).observation.step_count).toBe(oracle.tables.length + 1);
    const answer = HttpStepResponseSchema.parse((await post('/step', { action: { action_type: 'ANSWER', argument: oracle.goldAnswer }, session_id: sessionId })).json);
    expect(answer.done).toBe(true);
    expect(answer.reward).toBeGreaterThan(0.9);
    const state = EpisodeStateSchema.parse(JSON.parse((await get(`/state?session_id=${sessionId}`)).text));
    expect(state).toMatchObject({ question_id: oracle.questionId, done: true, step_count: oracle.tables.length + 2 });
    expect(state.total_reward).toBeGreaterThan(1);
    // Reset on the same session starts a new episode there.
    const again = await post('/reset', { question_id: oracle.questionId, session_id: sessionId });
    expect(again.json['session_id']).toBe(sessionId);
    expect((await post('/close', { session_id: sessionId })).json).toEqual({ session_id: sessionId, closed: true });
    expect((await post('/step', { action: { action_type: 'DESCRIBE', argument: 'x' }, session_id: sessionId })).status).toBe(404);
  });

  it('counts HTTP sessions in capacity: when full and none is idle, a new one gets 429 and the others keep working', async () => {
    const small = await startHarness(runtime, { maxSessions: 2 });
    try {
      const first = String((await post('/reset', {}, {}, small.baseUrl)).json['session_id']);
      const second = String((await post('/reset', {}, {}, small.baseUrl)).json['session_id']);
      expect(small.server.sessionCount()).toBe(2);
      const third = await post('/reset', {}, {}, small.baseUrl);
      expect(third.status).toBe(429);
      expect(String(third.json['detail'])).toMatch(/capacity/);
      expect(small.server.sessionCount()).toBe(2);
      expect((await get(`/state?session_id=${first}`, {}, small.baseUrl)).status).toBe(200);
      expect((await get(`/state?session_id=${second}`, {}, small.baseUrl)).status).toBe(200);
    } finally {
      await small.close();
    }
  });

  it('answers 429 when WebSocket sessions fill the server', async () => {
    const small = await startHarness(runtime, { maxSessions: 1 });
    try {
      const ws = await RawWs.open(small.wsUrl);
      expect((await ws.request({ type: 'state' }))['type']).toBe('state');
      const refused = await post('/reset', {}, {}, small.baseUrl);
      expect(refused.status).toBe(429);
      expect(String(refused.json['detail'])).toMatch(/capacity/);
      ws.close();
    } finally {
      await small.close();
    }
  });

  it('expires idle HTTP sessions', async () => {
    const idle = await startHarness(runtime, { idleTimeoutS: 0.2 });
    try {
      const id = String((await post('/reset', {}, {}, idle.baseUrl)).json['session_id']);
      await new Promise((r) => setTimeout(r, 600));
      expect((await get(`/state?session_id=${id}`, {}, idle.baseUrl)).status).toBe(404);
      expect(idle.server.sessionCount()).toBe(0);
    } finally {
      await idle.close();
    }
  });
});

describe('HTTP: docs, web, metrics, auth', () => {
  it('serves an OpenAPI 3.1 document built from the zod schemas and an offline /docs page', async () => {
    const doc = JSON.parse((await get('/openapi.json')).text) as { openapi: string; paths: Record<string, unknown>; components: { schemas: Record<string, unknown> } };
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(['/health', '/metadata', '/schema', '/reset', '/step', '/state', '/ws']));
    const { $schema: _s, ...action } = toJsonSchema(SqlActionSchema);
    expect(doc.components.schemas['SQLAction']).toEqual(action);
    const docs = await get('/docs');
    expect(docs.headers.get('content-type')).toMatch(/text\/html/);
    expect(docs.text).toContain('/openapi.json');
    expect(docs.text).not.toMatch(/<script[^>]+src=|<link[^>]+href="https?:/);
  });

  it('serves /web as one self-contained page and a catalog without gold data or paths', async () => {
    const page = await get('/web');
    expect(page.text).toContain('data-testid="reset-button"');
    expect(page.text).not.toMatch(/<script[^>]+src=|https?:\/\/(?!www\.w3\.org)/);
    const catalog = CatalogDocumentSchema.parse(JSON.parse((await get('/web/catalog')).text));
    expect(catalog.databases).toContain(oracle.dbId);
    expect(catalog.questions.map((q) => q.question_id)).toContain(oracle.questionId);
    const raw = (await get('/web/catalog')).text;
    expect(raw).not.toContain(oracle.goldSql);
    expect(raw).not.toMatch(/\.sqlite/);
  });

  it('exports Prometheus metrics: sessions, steps, step latency, errors by code', async () => {
    await post('/step', { action: { action_type: 'NOPE', argument: '' } });
    const metrics = (await get('/metrics')).text;
    for (const name of ['sqlenv_server_sessions_active', 'sqlenv_server_steps_total', 'sqlenv_server_step_duration_seconds_bucket', 'sqlenv_server_errors_total{code="HTTP_422"}']) {
      expect(metrics).toContain(name);
    }
  });

  it('requires the bearer token on every route when an api key is set', async () => {
    const secured = await startHarness(runtime, { apiKey: 'k3y' });
    try {
      for (const path of ['/health', '/schema', '/web', '/web/catalog', '/docs', '/openapi.json', '/metrics', '/state']) {
        expect((await get(path, {}, secured.baseUrl)).status).toBe(401);
      }
      expect((await post('/reset', {}, {}, secured.baseUrl)).status).toBe(401);
      expect((await get('/health', { authorization: 'Bearer nope' }, secured.baseUrl)).status).toBe(401);
      expect((await get('/health', { authorization: 'Bearer k3y' }, secured.baseUrl)).status).toBe(200);
      expect((await get('/web?api_key=k3y', {}, secured.baseUrl)).status).toBe(200);
      expect((await post('/reset', {}, { authorization: 'Bearer k3y' }, secured.baseUrl)).status).toBe(200);
    } finally {
      await secured.close();
    }
  });
});
