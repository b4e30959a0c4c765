import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode } from '@sqlenv/shared';
import type { SqlEnvRuntime } from '@sqlenv/sql-env';
import { ErrorFrameSchema, ObservationFrameSchema, StateReplyFrameSchema } from '@sqlenv/protocol';
import { SQLEnvClient } from '@sqlenv/client';
import { RawWs, startHarness, createTestRuntime, firstOracleEpisode, type OracleEpisode, waitUntil } from '@sqlenv/env-server/testing';
import { appErrorCodeOf } from '@sqlenv/shared/testing';

// Session lifetime under pressure: capacity never drops a live session, and an idle one
// loses its episode but not its client (RL trainers keep a pool of connections for hours).

let runtime: SqlEnvRuntime;
let oracle: OracleEpisode;

beforeAll(async () => {
  runtime = await createTestRuntime();
  oracle = firstOracleEpisode(runtime);
});

afterAll(async () => {
  await runtime?.close();
});

async function post(base: string, path: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Play the oracle episode on a connected client; returns the final step. */
async function playOracle(client: SQLEnvClient): Promise<{ reward: number | null; done: boolean }> {
  const reset = await client.reset({ question_id: oracle.questionId });
  expect(reset.observation.step_count).toBe(0);
  for (const table of oracle.tables) expect((await client.step({ action_type: 'DESCRIBE', argument: table })).observation.error).toBe('');
  await client.step({ action_type: 'QUERY', argument: oracle.goldSql });
  return client.step({ action_type: 'ANSWER', argument: oracle.goldAnswer });
}

describe('capacity: new sessions are refused, live ones never dropped', () => {
  it('a flood of anonymous POST /reset beyond capacity gets 429 while an HTTP session mid-episode keeps working', async () => {
    const server = await startHarness(runtime, { maxSessions: 8 });
    try {
      const live = await post(server.baseUrl, '/reset', { question_id: oracle.questionId });
      const sessionId = String(live.json['session_id']);
      const headers = { 'x-session-id': sessionId };
      expect((await post(server.baseUrl, '/step', { action: { action_type: 'DESCRIBE', argument: oracle.tables[0] } }, headers)).status).toBe(200);

      const flood = await Promise.all(Array.from({ length: 40 }, () => post(server.baseUrl, '/reset', {})));
      const statuses = flood.map((r) => r.status);
      expect(statuses.filter((s) => s === 200)).toHaveLength(7);
      expect(statuses.filter((s) => s === 429)).toHaveLength(33);
      expect(String(flood.find((r) => r.status === 429)?.json['detail'])).toMatch(/capacity/);
      expect(server.server.sessionCount()).toBe(8);

      // The live session is still there, with its episode: it finishes it.
      const queried = await post(server.baseUrl, '/step', { action: { action_type: 'QUERY', argument: oracle.goldSql } }, headers);
      expect(queried.status).toBe(200);
      const answered = await post(server.baseUrl, '/step', { action: { action_type: 'ANSWER', argument: oracle.goldAnswer } }, headers);
      expect(answered.status).toBe(200);
      expect(answered.json['done']).toBe(true);
      expect(answered.json['reward']).toBeGreaterThan(0.9);

      // A WebSocket client arriving now is refused with OpenEnv's capacity frame, nobody is dropped.
      const ws = await RawWs.open(server.wsUrl);
      expect(ErrorFrameSchema.parse(await ws.next()).data).toMatchObject({ code: 'CAPACITY_REACHED', active_sessions: 8, max_sessions: 8 });
      expect((await ws.closed).code).toBe(1000);
      expect(server.server.sessionCount()).toBe(8);
    } finally {
      await server.close();
    }
  });

  it('when full, a session idle past the timeout makes room; its client gets SESSION_ERROR then close 1000', async () => {
    const server = await startHarness(runtime, { maxSessions: 2, idleTimeoutS: 0.3 });
    try {
      const idle = await RawWs.open(server.wsUrl);
      ObservationFrameSchema.parse(await idle.request({ type: 'reset', data: { question_id: oracle.questionId } }));
      const busy = await RawWs.open(server.wsUrl);
      ObservationFrameSchema.parse(await busy.request({ type: 'reset', data: { question_id: oracle.questionId } }));
      await sleep(400);
      // `busy` acts again: only `idle` is idle now.
      StateReplyFrameSchema.parse(await busy.request({ type: 'state' }));
      const newcomer = await RawWs.open(server.wsUrl);
      StateReplyFrameSchema.parse(await newcomer.request({ type: 'state' }));
      expect(ErrorFrameSchema.parse(await idle.next()).data).toMatchObject({ code: 'SESSION_ERROR', message: expect.stringMatching(/idle .*slot/) });
      expect((await idle.closed).code).toBe(1000);
      StateReplyFrameSchema.parse(await busy.request({ type: 'state' }));
      busy.close();
      newcomer.close();
    } finally {
      await server.close();
    }
  });
});

describe('idle sessions: the episode is freed, the client is not broken', () => {
  it('a WebSocket idle past the timeout keeps its socket: a step says why its episode is gone, a reset plays a whole episode', async () => {
    const server = await startHarness(runtime, { idleTimeoutS: 0.2 });
    try {
      const ws = await RawWs.open(server.wsUrl);
      ObservationFrameSchema.parse(await ws.request({ type: 'reset', data: { question_id: oracle.questionId } }));
      ObservationFrameSchema.parse(await ws.request({ type: 'step', data: { action_type: 'DESCRIBE', argument: oracle.tables[0] } }));
      await sleep(800);
      expect(ws.isOpen).toBe(true);
      const lost = ErrorFrameSchema.parse(await ws.request({ type: 'step', data: { action_type: 'QUERY', argument: oracle.goldSql } })).data;
      expect(lost).toMatchObject({ code: 'EXECUTION_ERROR', app_code: 'EPISODE_STATE', message: expect.stringMatching(/idle for more than 0.2 s.*reset/) });
      expect(StateReplyFrameSchema.parse(await ws.request({ type: 'state' })).data.episode_id).toBeNull();

      ObservationFrameSchema.parse(await ws.request({ type: 'reset', data: { question_id: oracle.questionId } }));
      for (const table of oracle.tables) ObservationFrameSchema.parse(await ws.request({ type: 'step', data: { action_type: 'DESCRIBE', argument: table } }));
      ObservationFrameSchema.parse(await ws.request({ type: 'step', data: { action_type: 'QUERY', argument: oracle.goldSql } }));
      const answered = ObservationFrameSchema.parse(await ws.request({ type: 'step', data: { action_type: 'ANSWER', argument: oracle.goldAnswer } }));
      expect(answered.data).toMatchObject({ done: true });
      expect(answered.data.reward).toBeGreaterThan(0.9);
      expect(server.server.sessionCount()).toBe(1);
      ws.close();
    } finally {
      await server.close();
    }
  });

  it('the TypeScript client plays a whole episode after idling past the timeout, on the same connection', async () => {
    const server = await startHarness(runtime, { idleTimeoutS: 0.2 });
    try {
      const client = await SQLEnvClient.connect(server.baseUrl);
      await client.reset({ question_id: oracle.questionId });
      await sleep(800);
      const last = await playOracle(client);
      expect(last.done).toBe(true);
      expect(last.reward).toBeGreaterThan(0.9);
      expect(client.reconnects).toBe(0);
      await client.close();
    } finally {
      await server.close();
    }
  });

  it('the TypeScript client reconnects on reset after its idle session was closed for room; a step in between is an error', async () => {
    const server = await startHarness(runtime, { maxSessions: 1, idleTimeoutS: 0.2 });
    try {
      const client = await SQLEnvClient.connect(server.baseUrl);
      await client.reset({ question_id: oracle.questionId });
      await client.step({ action_type: 'DESCRIBE', argument: oracle.tables[0] ?? '' });
      await sleep(500);
      // Another client needs the only slot: the idle session is closed to make room.
      const other = await SQLEnvClient.connect(server.baseUrl);
      await other.reset({});
      await waitUntil(() => !client.isOpen);
      // Nothing is replayed: the step belonged to the lost episode.
      expect(await appErrorCodeOf(client.step({ action_type: 'QUERY', argument: oracle.goldSql }))).toBe(ErrorCode.EPISODE_STATE);
      await other.close();
      await waitUntil(() => server.server.sessionCount() === 0);
      const last = await playOracle(client);
      expect(last.done).toBe(true);
      expect(last.reward).toBeGreaterThan(0.9);
      expect(client.reconnects).toBe(1);
      await client.close();
      expect(await appErrorCodeOf(client.reset({}))).toBe(ErrorCode.TRANSPORT);
    } finally {
      await server.close();
    }
  });
});
