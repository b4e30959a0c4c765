import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError, ErrorCode } from '@sqlenv/shared';
import type { SqlEnvRuntime } from '@sqlenv/sql-env';
import { evaluate, OraclePolicy } from '@sqlenv/agents';
import { SQLEnvClient } from '@sqlenv/client';
import { startHarness, type Harness, oracleEpisodes, RUNAWAY_SQL, type OracleEpisode, startTestServer, type TestServer } from '@sqlenv/env-server/testing';
import { appErrorCodeOf } from '@sqlenv/shared/testing';

// The TypeScript client against the real server: typed calls, errors as AppError codes.

let runtime: SqlEnvRuntime;
let harness: Harness;
let oracle: OracleEpisode;
let server: TestServer | undefined;

beforeAll(async () => {
  ({ runtime, harness, oracle } = server = await startTestServer({ maxSessions: 8 }));
});

afterAll(() => server?.close());

describe('SQLEnvClient', () => {
  it('plays an episode from the base http:// URL, as the OpenEnv client does', async () => {
    const client = await SQLEnvClient.connect(harness.baseUrl);
    expect(client.url).toBe(`${harness.wsUrl}`);
    const reset = await client.reset({ question_id: oracle.questionId });
    expect(reset.observation.question.length).toBeGreaterThan(0);
    for (const table of oracle.tables) await client.step({ action_type: 'DESCRIBE', argument: table });
    await client.step({ action_type: 'QUERY', argument: oracle.goldSql });
    const last = await client.step({ action_type: 'ANSWER', argument: oracle.goldAnswer });
    expect(last.done).toBe(true);
    const state = await client.state();
    expect(state.total_reward).toBeGreaterThan(1);
    const mcp = await client.mcp({ method: 'tools/list', id: 1 });
    expect(mcp.error?.code).toBe(-32603);
    await client.close();
    expect(client.isOpen).toBe(false);
    expect(await appErrorCodeOf(client.state())).toBe(ErrorCode.TRANSPORT);
  });

  it('maps server errors to AppError codes and keeps the session', async () => {
    const client = await SQLEnvClient.connect(harness.wsUrl);
    expect(await appErrorCodeOf(client.step({ action_type: 'DESCRIBE', argument: 'x' }))).toBe(ErrorCode.EPISODE_STATE);
    expect(await appErrorCodeOf(client.reset({ question_id: 'missing' }))).toBe(ErrorCode.VALIDATION);
    expect(await appErrorCodeOf(client.step({ action_type: 'QUERY', argument: 'x', bogus: 1 } as never))).toBe(ErrorCode.VALIDATION);
    await client.reset({ question_id: oracle.questionId });
    expect((await client.state()).question_id).toBe(oracle.questionId);
    await client.close();
  });

  it('times out a request with TIMEOUT and still pairs later replies correctly', async () => {
    const client = await SQLEnvClient.connect(harness.baseUrl, { requestTimeoutMs: 200 });
    await client.reset({ question_id: oracle.questionId });
    expect(await appErrorCodeOf(client.step({ action_type: 'QUERY', argument: RUNAWAY_SQL }))).toBe(ErrorCode.TIMEOUT);
    // Later requests queue behind the runaway on the server and time out too, until it is cut off;
    // each late reply must be skipped, never handed to the next request (that would be a 'state' vs 'observation' mix-up).
    const state = await new Promise<Awaited<ReturnType<SQLEnvClient['state']>>>((resolve, reject) => {
      const attempt = (): void => {
        client.state().then(resolve, (error: unknown) => (error instanceof AppError && error.code === ErrorCode.TIMEOUT ? attempt() : reject(error)));
      };
      attempt();
    });
    expect(state.step_count).toBe(1);
    await client.close();
  });

  it('reports CAPACITY, UNAUTHORIZED and unreachable servers with their codes', async () => {
    const small = await startHarness(runtime, { maxSessions: 1, apiKey: 'tok' });
    try {
      expect(await appErrorCodeOf(SQLEnvClient.connect(small.baseUrl))).toBe(ErrorCode.UNAUTHORIZED);
      const first = await SQLEnvClient.connect(small.baseUrl, { apiKey: 'tok' });
      await first.reset({});
      const second = await SQLEnvClient.connect(small.baseUrl, { apiKey: 'tok' });
      expect(await appErrorCodeOf(second.reset({}))).toBe(ErrorCode.CAPACITY);
      await first.close();
    } finally {
      await small.close();
    }
    expect(await appErrorCodeOf(SQLEnvClient.connect(harness.baseUrl.replace(/:\d+$/, ':1')))).toBe(ErrorCode.TRANSPORT);
    expect(await appErrorCodeOf(SQLEnvClient.connect('ftp://example'))).toBe(ErrorCode.VALIDATION);
  });

  it('runs evaluate() remotely with the oracle policy', async () => {
    const questionIds = oracleEpisodes(runtime, 3).map((e) => e.questionId);
    const report = await evaluate(() => SQLEnvClient.connect(harness.baseUrl), new OraclePolicy(runtime.dataset), { questionIds, concurrency: 2 });
    expect(report.errors).toBe(0);
    expect(report.success_rate).toBe(1);
    expect(report.mean_reward).toBeGreaterThan(1);
  });
});
