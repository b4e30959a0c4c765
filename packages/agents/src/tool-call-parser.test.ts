import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ByteTokenizer, ChatFormat } from '@sqlenv/model';
import { actionCompletionIds, actionCompletionText } from './action-completion.ts';
import { loadAgentPrompt } from './agent-prompt.ts';
import { parseToolCall } from './tool-call-parser.ts';

const prompt = loadAgentPrompt();
const tools = prompt.tools;
const parse = (text: string, truncated = false): ReturnType<typeof parseToolCall> => parseToolCall(text, tools, { truncated });
const errorOf = (text: string): string => {
  const result = parse(text);
  if (result.ok) throw new Error(`expected a parse error for ${text.slice(0, 80)}`);
  return result.error;
};

describe('parseToolCall: accepted forms', () => {
  it('reads Qwen tool calls, with text and whitespace around them', () => {
    expect(parse('<tool_call>\n{"name": "query", "arguments": {"sql": "SELECT 1"}}\n</tool_call>')).toEqual({ ok: true, form: 'tagged', action: { action_type: 'QUERY', argument: 'SELECT 1' } });
    expect(parse('Let me look.\n<tool_call>{"name":"describe","arguments":{"table":"singer"}}</tool_call><|im_end|>')).toMatchObject({ ok: true, action: { action_type: 'DESCRIBE', argument: 'singer' } });
    expect(parse('<think>\nwhich table?\n</think>\n\n<tool_call>\n{"name": "SAMPLE", "arguments": {"table": "a"}}\n</tool_call>')).toMatchObject({ ok: true, action: { action_type: 'SAMPLE', argument: 'a' } });
  });

  it('reads the bare JSON a small model writes, fenced or not, and arguments as a string or under "parameters"', () => {
    expect(parse(' {"name": "answer", "arguments": {"value": "42"}} ')).toEqual({ ok: true, form: 'bare', action: { action_type: 'ANSWER', argument: '42' } });
    expect(parse('```json\n{"name": "query", "arguments": "{\\"sql\\": \\"SELECT 2\\"}"}\n```')).toMatchObject({ ok: true, action: { action_type: 'QUERY', argument: 'SELECT 2' } });
    expect(parse('{"name": "describe", "parameters": {"table": "t"}}<|endoftext|>')).toMatchObject({ ok: true, action: { action_type: 'DESCRIBE', argument: 't' } });
  });

  it('takes numbers, booleans and lists as an answer, only strings elsewhere', () => {
    expect(parse('{"name": "answer", "arguments": {"value": 3.5}}')).toMatchObject({ ok: true, action: { argument: '3.5' } });
    expect(parse('{"name": "answer", "arguments": {"value": ["a", 2, true]}}')).toMatchObject({ ok: true, action: { argument: 'a, 2, true' } });
    expect(errorOf('{"name": "describe", "arguments": {"table": 5}}')).toBe('describe needs a string "table"');
  });

  it('reads back exactly what actionCompletionText writes, for any action', () => {
    const chat = new ChatFormat(new ByteTokenizer(), { noThinkBlock: true });
    expect(actionCompletionText({ action_type: 'QUERY', argument: 'SELECT "a"' }, prompt, chat)).toBe('<tool_call>\n{"name": "query", "arguments": {"sql": "SELECT \\"a\\""}}\n</tool_call>');
    fc.assert(
      fc.property(fc.constantFrom('DESCRIBE', 'SAMPLE', 'QUERY', 'ANSWER' as const), fc.string({ unit: 'binary', maxLength: 200 }), (actionType, argument) => {
        const action = { action_type: actionType, argument };
        const ids = actionCompletionIds(action, prompt, chat);
        expect(ids.at(-1)).toBe(chat.imEndId);
        expect(parse(chat.tokenizer.decode(ids))).toMatchObject({ ok: true, action });
      }),
      { numRuns: 300 },
    );
  });
});

describe('parseToolCall: malformed and adversarial replies are parse errors, never exceptions', () => {
  it('says what is wrong', () => {
    expect(errorOf('')).toBe('empty reply');
    expect(errorOf('<|im_end|>')).toBe('empty reply');
    expect(errorOf('I think the answer is 5.')).toBe('no tool call found');
    expect(errorOf('<tool_call>{"name": "query", "arguments": {"sql": "SELECT 1"}}')).toBe('unterminated <tool_call> (no </tool_call>)');
    expect(errorOf('<tool_call>{"name": "query", "arguments": {"sql": "SELECT 1"}}</tool_call><tool_call>{"name": "answer", "arguments": {"value": "1"}}</tool_call>')).toBe('several tool calls; call one tool per reply');
    expect(errorOf('<tool_call>{"name": "drop_table", "arguments": {}}</tool_call>')).toBe("unknown tool 'drop_table' (tools: describe, sample, query, answer)");
    expect(errorOf('<tool_call>{"name": "query", "arguments": {"sql": "SELECT 1"</tool_call>')).toMatch(/^invalid JSON: /);
    expect(errorOf('<tool_call>["query"]</tool_call>')).toMatch(/must be a JSON object/);
    expect(errorOf('<tool_call>{"arguments": {}}</tool_call>')).toBe('the tool call has no "name"');
    expect(errorOf('<tool_call>{"name": "query"}</tool_call>')).toBe('query needs "arguments": {"sql": ...}');
    expect(errorOf('<tool_call>{"name": "query", "arguments": {"query": "SELECT 1"}}</tool_call>')).toBe('query needs a string "sql"');
    expect(errorOf('<tool_call>{"name": "query", "arguments": "SELECT 1"}</tool_call>')).toBe('query: "arguments" is a string that is not a JSON object');
    expect(errorOf('</tool_call>')).toBe('</tool_call> without <tool_call>');
    expect(errorOf('<think>still thinking')).toBe('unterminated <think> block');
    const cut = parse('<tool_call>\n{"name": "query", "argu', true);
    expect(cut).toEqual({ ok: false, error: 'unterminated <tool_call> (no </tool_call>) (the reply was cut at the token limit)' });
  });

  it('survives huge, deeply nested, repetitive and hostile input with short reasons', () => {
    const hostile = [
      'x'.repeat(2_000_000),
      `<tool_call>${'{'.repeat(200_000)}</tool_call>`,
      `<tool_call>${'['.repeat(100_000)}${']'.repeat(100_000)}</tool_call>`,
      '<tool_call>'.repeat(200_000),
      `${'<tool_call>a</tool_call>'.repeat(50_000)}`,
      `<tool_call>{"name": "query", "arguments": {"sql": "${'a'.repeat(200_000)}"}}</tool_call>`,
      `<tool_call>{"name": "${'n'.repeat(100_000)}", "arguments": {}}</tool_call>`,
      '<tool_call>{"name": "query", "arguments": {"__proto__": {"sql": "x"}}}</tool_call>',
      '<tool_call>{"__proto__": {"name": "query"}, "arguments": {"sql": "x"}}</tool_call>',
      `{"name": "answer", "arguments": {"value": ${'['.repeat(50_000)}1${']'.repeat(50_000)}}}`,
      '\u0000\uffff\ud800<tool_call>\ud800</tool_call>',
      `${'<think>'.repeat(1000)}${'</think>'.repeat(1000)}`,
      '`'.repeat(100_000),
    ];
    for (const text of hostile) {
      const result = parse(text);
      expect(result.ok).toBe(false);
      if (!result.ok) expect(result.error.length).toBeLessThan(200);
    }
    expect(parse(`<tool_call>{"name": "answer", "arguments": {"value": "${'a'.repeat(200_000)}"}}</tool_call>`)).toMatchObject({ ok: false, error: expect.stringMatching(/over 100000 characters/) as unknown });
  });

  it('never throws on arbitrary text (property)', () => {
    const pieces = fc.constantFrom('<tool_call>', '</tool_call>', '<think>', '</think>', '{', '}', '"name"', ':', '"query"', '"arguments"', '{"sql": "x"}', ',', '<|im_end|>', '```', ' ', '\n');
    fc.assert(
      fc.property(fc.array(fc.oneof(pieces, fc.string({ maxLength: 8 })), { maxLength: 40 }), (parts) => {
        const result = parse(parts.join(''));
        if (!result.ok) expect(typeof result.error).toBe('string');
      }),
      { numRuns: 2000 },
    );
  });
});
