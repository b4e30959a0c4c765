import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SqlEnvRuntime } from '@sqlenv/sql-env';
import { ErrorFrameSchema, McpReplyFrameSchema, ObservationFrameSchema, StateReplyFrameSchema } from '@sqlenv/protocol';
import { RawWs, startHarness, type Harness, RUNAWAY_SQL, type OracleEpisode, startTestServer, type TestServer, waitUntil } from '@sqlenv/env-server/testing';

// Conformance of /ws with packages/env-server/README.md, against the real SQL environment.

let runtime: SqlEnvRuntime;
let harness: Harness;
let oracle: OracleEpisode;
let server: TestServer | undefined;

beforeAll(async () => {
  ({ runtime, harness, oracle } = server = await startTestServer());
});

afterAll(() => server?.close());

function errorData(frame: unknown): { code: string; message: string; errors?: unknown[]; active_sessions?: number; max_sessions?: number } {
  return ErrorFrameSchema.parse(frame).data;
}

async function expectSessionAlive(ws: RawWs): Promise<void> {
  const reply = await ws.request({ type: 'state' });
  expect(StateReplyFrameSchema.safeParse(reply).success).toBe(true);
}

describe('WS /ws: frames and replies', () => {
  it('plays a whole oracle episode: observation frames keep reward/done beside the observation', async () => {
    const ws = await RawWs.open(harness.wsUrl);
    const reset = ObservationFrameSchema.parse(await ws.request({ type: 'reset', data: { question_id: oracle.questionId } }));
    expect(reset.data.reward).toBeNull();
    expect(reset.data.done).toBe(false);
    expect(reset.data.observation.step_count).toBe(0);
    for (const table of oracle.tables) {
      const described = ObservationFrameSchema.parse(await ws.request({ type: 'step', data: { action_type: 'DESCRIBE', argument: table } }));
      expect(described.data.observation.error).toBe('');
      expect(described.data.observation.schema_info).toContain(`- ${table} (`);
    }
    const queried = await ws.request({ type: 'step', data: { action_type: 'QUERY', argument: oracle.goldSql } });
    expect(Object.keys(queried['data'] as object).sort()).toEqual(['done', 'observation', 'reward']);
    const answered = ObservationFrameSchema.parse(await ws.request({ type: 'step', data: { action_type: 'ANSWER', argument: oracle.goldAnswer } }));
    expect(answered.data.done).toBe(true);
    expect(answered.data.reward).toBeGreaterThan(0.9);
    const state = StateReplyFrameSchema.parse(await ws.request({ type: 'state' }));
    expect(state.data).toMatchObject({ question_id: oracle.questionId, db_id: oracle.dbId, step_count: oracle.tables.length + 2, done: true });
    expect(state.data.total_reward).toBeGreaterThan(1);
    ws.close();
  });

  it('accepts reset without data and a reset in the middle of an episode starts a new one', async () => {
    const ws = await RawWs.open(harness.wsUrl);
    ObservationFrameSchema.parse(await ws.request({ type: 'reset' }));
    ObservationFrameSchema.parse(await ws.request({ type: 'reset', data: { question_id: oracle.questionId, episode_id: 'first' } }));
    ObservationFrameSchema.parse(await ws.request({ type: 'step', data: { action_type: 'DESCRIBE', argument: oracle.tables[0] } }));
    const again = ObservationFrameSchema.parse(await ws.request({ type: 'reset', data: { question_id: oracle.questionId, episode_id: 'second', extra_kwarg: 1 } }));
    expect(again.data.observation.step_count).toBe(0);
    const state = StateReplyFrameSchema.parse(await ws.request({ type: 'state' }));
    expect(state.data).toMatchObject({ episode_id: 'second', step_count: 0, done: false });
    ws.close();
  });

  it('answers pipelined requests one each, in order', async () => {
    const ws = await RawWs.open(harness.wsUrl);
    ws.send({ type: 'reset', data: { question_id: oracle.questionId } });
    ws.send({ type: 'step', data: { action_type: 'DESCRIBE', argument: oracle.tables[0] } });
    ws.send({ type: 'step', data: { action_type: 'QUERY', argument: oracle.goldSql } });
    ws.send({ type: 'bogus' });
    ws.send({ type: 'state' });
    const replies = [await ws.next(), await ws.next(), await ws.next(), await ws.next(), await ws.next()];
    expect(replies.map((r) => r['type'])).toEqual(['observation', 'observation', 'observation', 'error', 'state']);
    expect(ObservationFrameSchema.parse(replies[2]).data.observation.step_count).toBe(2);
    expect(StateReplyFrameSchema.parse(replies[4]).data.step_count).toBe(2);
    ws.close();
  });

  it('keeps order under backpressure (socket paused while the session queue is full)', async () => {
    const tight = await startHarness(runtime, { maxQueuedRequests: 2 });
    try {
      const ws = await RawWs.open(tight.wsUrl);
      ws.send({ type: 'reset', data: { question_id: oracle.questionId } });
      for (let i = 0; i < 10; i += 1) ws.send({ type: 'step', data: { action_type: 'DESCRIBE', argument: oracle.tables[0] } });
      ws.send({ type: 'state' });
      const replies = [];
      for (let i = 0; i < 12; i += 1) replies.push(await ws.next());
      const counts = replies.slice(1, 11).map((r) => ObservationFrameSchema.parse(r).data.observation.step_count);
      expect(counts).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      expect(StateReplyFrameSchema.parse(replies[11]).data.step_count).toBe(10);
      ws.close();
    } finally {
      await tight.close();
    }
  });

  it('answers mcp with JSON-RPC -32603 "Environment does not support MCP" in an mcp frame', async () => {
    const ws = await RawWs.open(harness.wsUrl);
    const reply = McpReplyFrameSchema.parse(await ws.request({ type: 'mcp', data: { jsonrpc: '2.0', id: 7, method: 'tools/list' } }));
    expect(reply.data).toEqual({ jsonrpc: '2.0', id: 7, error: { code: -32603, message: 'Environment does not support MCP' } });
    const invalid = McpReplyFrameSchema.parse(await ws.request({ type: 'mcp', data: { id: 'x' } }));
    expect(invalid.data.error?.code).toBe(-32600);
    expect(invalid.data.id).toBe('x');
    await expectSessionAlive(ws);
    ws.close();
  });

  it('closes with 1000 and no reply frame on a close request', async () => {
    const ws = await RawWs.open(harness.wsUrl);
    ws.send({ type: 'close' });
    expect((await ws.closed).code).toBe(1000);
    await expect(ws.next(200)).rejects.toThrow(/no frame/);
  });
});

describe('WS /ws: errors that keep the session open', () => {
  it('INVALID_JSON, UNKNOWN_TYPE and VALIDATION_ERROR (frame and action) each get one error frame', async () => {
    const ws = await RawWs.open(harness.wsUrl);
    expect(errorData(await ws.request('{not json')).code).toBe('INVALID_JSON');
    expect(errorData(await ws.request({ type: 'teleport' })).code).toBe('UNKNOWN_TYPE');
    expect(errorData(await ws.request({ data: {} })).code).toBe('UNKNOWN_TYPE');
    expect(errorData(await ws.request([1, 2])).code).toBe('VALIDATION_ERROR');

    const extraKey = errorData(await ws.request({ type: 'state', data: {} }));
    expect(extraKey.code).toBe('VALIDATION_ERROR');
    expect(extraKey.errors?.length).toBeGreaterThan(0);
    expect(errorData(await ws.request({ type: 'step' })).code).toBe('VALIDATION_ERROR');

    ObservationFrameSchema.parse(await ws.request({ type: 'reset', data: { question_id: oracle.questionId } }));
    const unknownField = errorData(await ws.request({ type: 'step', data: { action_type: 'QUERY', argument: 'SELECT 1', limit: 5 } }));
    expect(unknownField.code).toBe('VALIDATION_ERROR');
    expect(JSON.stringify(unknownField.errors)).toContain('limit');
    expect(errorData(await ws.request({ type: 'step', data: { action_type: 'DROP', argument: 't' } })).code).toBe('VALIDATION_ERROR');
    expect(errorData(await ws.request({ type: 'reset', data: { seed: -1 } })).code).toBe('VALIDATION_ERROR');
    await expectSessionAlive(ws);
    ws.close();
  });

  it('rejects ids outside the loaded catalog, and never takes a path', async () => {
    const ws = await RawWs.open(harness.wsUrl);
    const question = errorData(await ws.request({ type: 'reset', data: { question_id: 'no_such_question' } }));
    expect(question.code).toBe('VALIDATION_ERROR');
    expect(question.message).toMatch(/Unknown question_id 'no_such_question'/);
    const pathLike = errorData(await ws.request({ type: 'reset', data: { db_id: '../../etc/passwd' } }));
    expect(pathLike.code).toBe('VALIDATION_ERROR');
    expect(pathLike.message).toMatch(/Unknown db_id/);
    await expectSessionAlive(ws);
    ws.close();
  });

  it('EXECUTION_ERROR for a step before reset and after done; the agent\'s bad SQL is an observation', async () => {
    const ws = await RawWs.open(harness.wsUrl);
    const early = errorData(await ws.request({ type: 'step', data: { action_type: 'DESCRIBE', argument: 'x' } }));
    expect(early.code).toBe('EXECUTION_ERROR');
    expect(early.message).toMatch(/reset/);
    ObservationFrameSchema.parse(await ws.request({ type: 'reset', data: { question_id: oracle.questionId } }));
    const badSql = ObservationFrameSchema.parse(await ws.request({ type: 'step', data: { action_type: 'QUERY', argument: 'SELECT no_such_column FROM nowhere' } }));
    expect(badSql.data.observation.error).not.toBe('');
    expect(badSql.data.reward).toBeLessThan(0);
    ObservationFrameSchema.parse(await ws.request({ type: 'step', data: { action_type: 'ANSWER', argument: 'whatever' } }));
    expect(errorData(await ws.request({ type: 'step', data: { action_type: 'ANSWER', argument: 'again' } })).code).toBe('EXECUTION_ERROR');
    await expectSessionAlive(ws);
    ws.close();
  });

  it('answers a frame over 1 MiB with an error frame and keeps the session', async () => {
    const ws = await RawWs.open(harness.wsUrl);
    ObservationFrameSchema.parse(await ws.request({ type: 'reset', data: { question_id: oracle.questionId } }));
    const huge = JSON.stringify({ type: 'step', data: { action_type: 'QUERY', argument: 'x'.repeat(1024 * 1024 + 16) } });
    const reply = errorData(await ws.request(huge));
    expect(reply.code).toBe('VALIDATION_ERROR');
    expect(reply.message).toMatch(/exceeds the limit of 1048576 bytes/);
    const after = ObservationFrameSchema.parse(await ws.request({ type: 'step', data: { action_type: 'DESCRIBE', argument: oracle.tables[0] } }));
    expect(after.data.observation.step_count).toBe(1);
    // Past 4x the limit the frame is not even buffered: the socket is closed with 1009 (message too big).
    ws.send('x'.repeat(4 * 1024 * 1024 + 1));
    expect((await ws.closed).code).toBe(1009);
  });

  it('a runaway query on one session does not hold up another session', async () => {
    const slow = await RawWs.open(harness.wsUrl);
    const fast = await RawWs.open(harness.wsUrl);
    ObservationFrameSchema.parse(await slow.request({ type: 'reset', data: { question_id: oracle.questionId } }));
    const order: string[] = [];
    const slowReply = slow.request({ type: 'step', data: { action_type: 'QUERY', argument: RUNAWAY_SQL } }, 30_000).then((r) => {
      order.push('slow');
      return r;
    });
    ObservationFrameSchema.parse(await fast.request({ type: 'reset', data: { question_id: oracle.questionId } }));
    ObservationFrameSchema.parse(await fast.request({ type: 'step', data: { action_type: 'QUERY', argument: oracle.goldSql } }));
    order.push('fast');
    const cut = ObservationFrameSchema.parse(await slowReply);
    expect(order).toEqual(['fast', 'slow']);
    expect(cut.data.observation.error).toMatch(/time|interrupt/i);
    slow.close();
    fast.close();
  });
});

describe('WS /ws: errors that end the session', () => {
  it('CAPACITY_REACHED after the handshake, then close 1000; a freed slot is reusable', async () => {
    const small = await startHarness(runtime, { maxSessions: 2 });
    try {
      const a = await RawWs.open(small.wsUrl);
      const b = await RawWs.open(small.wsUrl);
      await expectSessionAlive(a);
      await expectSessionAlive(b);
      const c = await RawWs.open(small.wsUrl);
      const full = errorData(await c.next());
      expect(full).toMatchObject({ code: 'CAPACITY_REACHED', active_sessions: 2, max_sessions: 2 });
      expect((await c.closed).code).toBe(1000);
      a.send({ type: 'close' });
      await a.closed;
      await waitUntil(() => small.server.sessionCount() === 1);
      const d = await RawWs.open(small.wsUrl);
      await expectSessionAlive(d);
      d.close();
      b.close();
    } finally {
      await small.close();
    }
  });

  it('FACTORY_ERROR then close 1000 when no environment can be created', async () => {
    const broken = await startHarness({
      dataset: runtime.dataset,
      createEnvironment: () => {
        throw new Error('out of environments');
      },
      close: () => Promise.resolve(),
    });
    try {
      const ws = await RawWs.open(broken.wsUrl);
      const frame = errorData(await ws.next());
      expect(frame.code).toBe('FACTORY_ERROR');
      expect(frame.message).toMatch(/out of environments/);
      expect((await ws.closed).code).toBe(1000);
    } finally {
      await broken.close();
    }
  });

  it('on close(): in-flight requests finish, then SESSION_ERROR "Server shutting down" and close 1001', async () => {
    const doomed = await startHarness(runtime);
    const ws = await RawWs.open(doomed.wsUrl);
    ObservationFrameSchema.parse(await ws.request({ type: 'reset', data: { question_id: oracle.questionId } }));
    ws.send({ type: 'step', data: { action_type: 'QUERY', argument: RUNAWAY_SQL } });
    // Give the frame time to reach the server; the runaway then holds the session busy until its timeout.
    await new Promise((r) => setTimeout(r, 300));
    const closing = doomed.close();
    expect(ObservationFrameSchema.parse(await ws.next(30_000)).data.observation.error).not.toBe('');
    const frame = errorData(await ws.next());
    expect(frame).toMatchObject({ code: 'SESSION_ERROR', message: 'Server shutting down' });
    expect((await ws.closed).code).toBe(1001);
    await closing;
    await expect(RawWs.open(doomed.wsUrl)).rejects.toThrow();
  });
});

describe('WS /ws: auth', () => {
  it('requires the bearer token (header, ?api_key= or subprotocol) when an api key is set', async () => {
    const secured = await startHarness(runtime, { apiKey: 'sekret-token' });
    try {
      await expect(RawWs.open(secured.wsUrl)).rejects.toThrow(/401/);
      await expect(RawWs.open(secured.wsUrl, { headers: { authorization: 'Bearer wrong' } })).rejects.toThrow(/401/);
      const byHeader = await RawWs.open(secured.wsUrl, { headers: { authorization: 'Bearer sekret-token' } });
      await expectSessionAlive(byHeader);
      const byQuery = await RawWs.open(`${secured.wsUrl}?api_key=sekret-token`);
      await expectSessionAlive(byQuery);
      const byProtocol = await RawWs.open(secured.wsUrl, { protocols: ['sqlenv', 'sqlenv.bearer.sekret-token'] });
      expect(byProtocol.ws.protocol).toBe('sqlenv');
      await expectSessionAlive(byProtocol);
      for (const ws of [byHeader, byQuery, byProtocol]) ws.close();
    } finally {
      await secured.close();
    }
  });
});
