import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadAgentPrompt, parseToolCall } from '@sqlenv/agents';
import { MAX_ARGUMENT_CHARS, ObservationFrameSchema, type ActionType, type Cell, type SqlAction } from '@sqlenv/protocol';
import { verifyAnswer, type GoldAnswer, type SqlEnvRuntime } from '@sqlenv/sql-env';
import { RawWs, type Harness, type OracleEpisode, startTestServer, type TestServer } from '@sqlenv/env-server/testing';

// Every entry point that applies regular expressions (or any other text
// processing) to agent- or client-supplied text must take time linear in it:
// one ~100 KB frame once stalled the whole server for seconds through
// backtracking patterns. Each call below gets strings shaped to defeat such
// patterns (long runs of semicolons, digits, spaces, "answer:" prefixes...)
// and must stay far below a second of CPU. This is a safety bound, two orders
// of magnitude above a normal call (a few milliseconds), not a speed test:
// process CPU time, not wall time, so a busy machine does not fail it.

const CPU_BOUND_MS = 250;
const ONE_MB = 1_000_000;
const actionTypes: readonly ActionType[] = ['DESCRIBE', 'SAMPLE', 'QUERY', 'ANSWER'];

/** `prefix`, then `unit` repeated, then `suffix`, `chars` long in all. */
function fill(prefix: string, unit: string, suffix: string, chars: number): string {
  const body = unit.repeat(Math.ceil(Math.max(0, chars - prefix.length - suffix.length) / unit.length));
  return (prefix + body).slice(0, chars - suffix.length) + suffix;
}

/** Inputs that made one of the former patterns backtrack, and a few that might make others. */
function adversarialTexts(chars: number): [string, string][] {
  return [
    ['semicolons', fill('', ';', 'x', chars)],
    ['semicolons after a name', fill('singer', ';', ' x', chars)],
    ['semicolons after SQL', fill('SELECT 1', ';', 'x', chars)],
    ['semicolons and spaces', fill('t', '; ', 'x', chars)],
    ['digits', fill('', '1', 'x', chars)],
    ['digits after a dot', fill('1.', '1', 'x', chars)],
    ['digits in an exponent', fill('1e', '1', 'e', chars)],
    ['thousands groups', fill('1', ',111', '.x', chars)],
    ['answer and spaces', fill('answer', ' ', 'x', chars)],
    ['bold answer and spaces', fill('**the final answer', ' ', '** x', chars)],
    ['answer prefixes', fill('', 'Answer: ', '', chars)],
    ['the and spaces', fill('the', ' ', 'x', chars)],
    ['main and spaces', fill('main', ' ', 'x', chars)],
    ['spaces', fill('', ' ', 'x', chars)],
    ['tabs and newlines', fill('a', '\t\n ', 'x', chars)],
    ['fences', fill('```\n', '`', '\nx', chars)],
    ['boxed', fill('$\\boxed{', '}$', 'x', chars)],
    ['emphasis', fill('**', '*', 'x', chars)],
    ['answer tags', fill('<answer>', '</answer>', 'x', chars)],
    ['list items', fill('', '1, ', 'and x', chars)],
    ['ands', fill('a', ' and', ' b', chars)],
    ['bullets', fill('', '- 1\n', '', chars)],
    ['numbered', fill('', '1', '.', chars)],
    ['table rows', fill('', '1 | 2\n', '', chars)],
    ['escaped pipes', fill('', '\\|', 'x', chars)],
    ['backslashes', fill('', '\\', '|', chars)],
    ['markdown rule', fill('|:', '-', ':x', chars)],
    ['quotes', fill('', '"\'`[', '', chars)],
    ['slashes', fill('', '/', 'x', chars)],
    ['surrogates', fill('', '\uD800', '', chars)],
  ];
}

async function cpuMs(run: () => unknown): Promise<number> {
  const start = process.cpuUsage();
  await run();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1_000;
}

async function expectLinear(label: string, run: () => unknown): Promise<void> {
  const ms = await cpuMs(run);
  expect(ms, `${label}: ${ms.toFixed(1)} ms of CPU`).toBeLessThan(CPU_BOUND_MS);
}

let runtime: SqlEnvRuntime;
let harness: Harness;
let oracle: OracleEpisode;
let server: TestServer | undefined;

beforeAll(async () => {
  ({ runtime, harness, oracle } = server = await startTestServer({ maxSessions: 8 }));
});

afterAll(() => server?.close());

describe('adversarial input: the environment', () => {
  it('answers every action type with 100 KB adversarial arguments in bounded CPU time', async () => {
    const env = runtime.createEnvironment();
    for (const actionType of actionTypes) {
      for (const [name, text] of adversarialTexts(MAX_ARGUMENT_CHARS)) {
        await env.reset({ question_id: oracle.questionId });
        let outcome: Awaited<ReturnType<typeof env.step>> | undefined;
        await expectLinear(`${actionType} ${name}`, async () => {
          outcome = await env.step({ action_type: actionType, argument: text });
        });
        expect(outcome?.observation.step_count).toBe(1);
      }
    }
    env.close();
  });

  it('scores a QUERY whose result cells are long runs of digits in bounded CPU time', async () => {
    // The progress reward parses every result cell as a number; 90 cells of
    // 10,000 digits once cost seconds there.
    const env = runtime.createEnvironment();
    await env.reset({ question_id: oracle.questionId });
    const sql = "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 90) SELECT replace(hex(zeroblob(5000)), '0', '1') || 'x' FROM c";
    let outcome: Awaited<ReturnType<typeof env.step>> | undefined;
    await expectLinear('QUERY of digit cells', async () => {
      outcome = await env.step({ action_type: 'QUERY', argument: sql });
    });
    expect(outcome?.observation.error).toBe('');
    env.close();
  });

  it('turns ~1 MB arguments of every action type into error observations, not exceptions', async () => {
    const env = runtime.createEnvironment();
    for (const actionType of [...actionTypes, 'PARSE_ERROR' as const]) {
      await env.reset({ question_id: oracle.questionId });
      let outcome: Awaited<ReturnType<typeof env.step>> | undefined;
      await expectLinear(`${actionType} 1 MB`, async () => {
        outcome = await env.step({ action_type: actionType, argument: fill('', ';', 'x', ONE_MB) });
      });
      expect(outcome?.observation.error).toMatch(/limit is 100000/);
      expect(outcome?.done).toBe(false);
    }
    env.close();
  });
});

describe('adversarial input: the answer verifier', () => {
  const golds: [string, GoldAnswer][] = [
    ['integer', gold('integer', [[25]])],
    ['float', gold('float', [[3.25]])],
    ['string', gold('string', [['Paris']])],
    ['numeric text', gold('string', [['25']])],
    ['list', gold('list', [['a'], ['b'], ['c']])],
    ['table', gold('table', [['a', 1], ['b', 2]], ['name', 'n'])],
  ];

  it('verifies 100 KB and 1 MB adversarial answers against every answer type in bounded CPU time', async () => {
    for (const chars of [MAX_ARGUMENT_CHARS, ONE_MB]) {
      for (const [type, goldAnswer] of golds) {
        for (const [name, text] of adversarialTexts(chars)) {
          await expectLinear(`${type} gold, ${name} (${chars} characters)`, () => verifyAnswer(text, goldAnswer));
        }
      }
    }
  });
});

describe('adversarial input: the LLM tool-call parser', () => {
  it('parses 1 MB adversarial replies in bounded CPU time', async () => {
    const tools = loadAgentPrompt().tools;
    for (const [name, text] of adversarialTexts(ONE_MB)) {
      const call = `<tool_call>{"name": "answer", "arguments": {"value": ${JSON.stringify(text)}}}</tool_call>`;
      for (const reply of [text, call, `<think>${text}</think>${call}`, text + '<|im_end|>'.repeat(1_000)]) {
        await expectLinear(`tool call, ${name}`, () => parseToolCall(reply, tools));
      }
    }
  });
});

describe('adversarial input: the server', () => {
  /** A JSON body encoded before the measured call: the test's own encoding is not the server's work. */
  const encode = (body: unknown): Buffer => Buffer.from(JSON.stringify(body));

  async function post(path: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
    const res = await fetch(`${harness.baseUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: Buffer.isBuffer(body) ? body : encode(body) });
    return { status: res.status, json: (await res.json()) as Record<string, unknown> };
  }

  it('POST /reset and /step with adversarial bodies stay within bounded CPU time', async () => {
    for (const [name, text] of adversarialTexts(ONE_MB / 2 - 1_000)) {
      // Over 1 MiB once JSON-escaped (quotes, backslashes, lone surrogates): refused by size, 413.
      const body = encode({ question_id: text, episode_id: text });
      await expectLinear(`/reset ${name}`, async () => {
        expect([413, 422]).toContain((await post('/reset', body)).status);
      });
    }
    const opened = await post('/reset', { question_id: oracle.questionId });
    const sessionId = opened.json['session_id'] as string;
    for (const actionType of actionTypes) {
      for (const [name, text] of adversarialTexts(MAX_ARGUMENT_CHARS)) {
        await post('/reset', { session_id: sessionId, question_id: oracle.questionId });
        const body = encode({ session_id: sessionId, action: { action_type: actionType, argument: text } });
        await expectLinear(`/step ${actionType} ${name}`, async () => {
          expect((await post('/step', body)).status).toBe(200);
        });
      }
      await post('/reset', { session_id: sessionId, question_id: oracle.questionId });
      const oversized = await post('/step', { session_id: sessionId, action: { action_type: actionType, argument: fill('', '1', 'x', ONE_MB - 1_000) } });
      expect(oversized.status).toBe(200);
      expect(String((oversized.json['observation'] as Record<string, unknown>)['error'])).toMatch(/limit is 100000/);
    }
    await post('/close', { session_id: sessionId });
  });

  it('WebSocket step frames with adversarial arguments stay within bounded CPU time', async () => {
    const ws = await RawWs.open(harness.wsUrl);
    for (const actionType of actionTypes) {
      for (const [name, text] of adversarialTexts(MAX_ARGUMENT_CHARS)) {
        ObservationFrameSchema.parse(await ws.request({ type: 'reset', data: { question_id: oracle.questionId } }));
        const action: SqlAction = { action_type: actionType, argument: text };
        const frame = JSON.stringify({ type: 'step', data: action });
        await expectLinear(`ws step ${actionType} ${name}`, async () => {
          ObservationFrameSchema.parse(await ws.request(frame));
        });
      }
    }
    ws.close();
  });
});

function gold(answerType: GoldAnswer['answer_type'], rows: Cell[][], columns: string[] = ['value']): GoldAnswer {
  return { answer_type: answerType, gold_answer: '', gold_rows: rows, gold_columns: columns };
}
