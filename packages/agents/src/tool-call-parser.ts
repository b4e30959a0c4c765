import { MAX_ARGUMENT_CHARS, type SqlAction } from '@sqlenv/protocol';
import type { AgentTool } from './agent-prompt.ts';

/**
 * Reads the one tool call of a model reply. Accepted forms (anything else is a
 * parse error with a short reason, never an exception):
 *
 * 1. Qwen's format: `<tool_call>{"name": "query", "arguments": {"sql": "..."}}</tool_call>`,
 *    whitespace around the JSON free, text before the tag allowed (and ignored).
 * 2. The bare JSON object a small model often writes instead: the whole reply is
 *    `{"name": ..., "arguments": {...}}`, optionally inside a ``` / ```json fence.
 *
 * In both, `arguments` may also be a JSON-encoded string (OpenAI style) or be
 * called `parameters` (Llama style); the tool name matches case-insensitively;
 * the argument is the tool's one declared parameter. `answer` also takes a
 * number, a boolean or a list of those (joined with ", "). A `<think>…</think>`
 * block is skipped; trailing `<|im_end|>` / `<|endoftext|>` are ignored.
 *
 * Rejected: no tool call, an unterminated `<tool_call>`, several tool calls
 * (one per reply: the environment takes one action per step), invalid JSON, an
 * unknown tool, a missing or non-string argument, an argument over
 * MAX_ARGUMENT_CHARS. Work is linear in the reply (indexOf scans and one
 * JSON.parse; no backtracking regular expressions), and reasons are short and
 * bounded whatever the input.
 */
export type ToolCallParse = { ok: true; action: SqlAction; form: 'tagged' | 'bare' } | { ok: false; error: string };

export interface ParseOptions {
  /** The reply was cut at its token limit: a failure says so. */
  truncated?: boolean;
}

const OPEN = '<tool_call>';
const CLOSE = '</tool_call>';
const TRAILING_SPECIALS = ['<|im_end|>', '<|endoftext|>'];

export function parseToolCall(reply: string, tools: readonly AgentTool[], options: ParseOptions = {}): ToolCallParse {
  const result = parseReply(reply, tools);
  if (!result.ok && options.truncated === true) return { ok: false, error: `${result.error} (the reply was cut at the token limit)` };
  return result;
}

function parseReply(reply: string, tools: readonly AgentTool[]): ToolCallParse {
  let text = stripTrailingSpecials(reply);
  const thinkEnd = text.lastIndexOf('</think>');
  if (thinkEnd >= 0) text = text.slice(thinkEnd + '</think>'.length);
  else if (text.includes('<think>')) return fail('unterminated <think> block');
  if (text.trim() === '') return fail('empty reply');

  const open = text.indexOf(OPEN);
  if (open >= 0) {
    const close = text.indexOf(CLOSE, open + OPEN.length);
    if (close < 0) return fail(`unterminated ${OPEN} (no ${CLOSE})`);
    if (text.indexOf(OPEN, close + CLOSE.length) >= 0) return fail('several tool calls; call one tool per reply');
    return toAction(text.slice(open + OPEN.length, close), tools, 'tagged');
  }
  if (text.includes(CLOSE)) return fail(`${CLOSE} without ${OPEN}`);
  const bare = unfence(text.trim());
  if (bare.startsWith('{') && bare.endsWith('}')) return toAction(bare, tools, 'bare');
  return fail('no tool call found');
}

function stripTrailingSpecials(text: string): string {
  let out = text;
  for (;;) {
    const trimmed = out.trimEnd();
    const special = TRAILING_SPECIALS.find((s) => trimmed.endsWith(s));
    if (special === undefined) return out;
    out = trimmed.slice(0, trimmed.length - special.length);
  }
}

/** ```json … ``` → … (first line of the fence dropped). */
function unfence(text: string): string {
  if (!text.startsWith('```') || !text.endsWith('```') || text.length < 6) return text;
  const firstNewline = text.indexOf('\n');
  if (firstNewline < 0) return text;
  return text.slice(firstNewline + 1, text.length - 3).trim();
}

function toAction(json: string, tools: readonly AgentTool[], form: 'tagged' | 'bare'): ToolCallParse {
  let call: unknown;
  try {
    call = JSON.parse(json);
  } catch (error) {
    return fail(`invalid JSON: ${short(error instanceof Error ? error.message : String(error), 80)}`);
  }
  if (typeof call !== 'object' || call === null || Array.isArray(call)) return fail('the tool call must be a JSON object {"name": ..., "arguments": {...}}');
  const record = call as Record<string, unknown>;
  const name = record['name'];
  if (typeof name !== 'string') return fail('the tool call has no "name"');
  const tool = tools.find((t) => t.name.toLowerCase() === name.toLowerCase());
  if (tool === undefined) return fail(`unknown tool '${short(name, 40)}' (tools: ${tools.map((t) => t.name).join(', ')})`);
  let args = Object.hasOwn(record, 'arguments') ? record['arguments'] : record['parameters'];
  if (typeof args === 'string') {
    try {
      args = JSON.parse(args);
    } catch {
      return fail(`${tool.name}: "arguments" is a string that is not a JSON object`);
    }
  }
  if (typeof args !== 'object' || args === null || Array.isArray(args)) return fail(`${tool.name} needs "arguments": {"${tool.parameter}": ...}`);
  const value = (args as Record<string, unknown>)[tool.parameter];
  const argument = argumentText(value, tool.actionType === 'ANSWER');
  if (argument === undefined) return fail(`${tool.name} needs a string "${tool.parameter}"`);
  if (argument.length > MAX_ARGUMENT_CHARS) return fail(`${tool.name}: "${tool.parameter}" is over ${MAX_ARGUMENT_CHARS} characters`);
  return { ok: true, action: { action_type: tool.actionType, argument }, form };
}

function argumentText(value: unknown, isAnswer: boolean): string | undefined {
  if (typeof value === 'string') return value;
  if (!isAnswer) return undefined;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (Array.isArray(value) && value.every((v) => typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean')) return value.map(String).join(', ');
  return undefined;
}

function short(text: string, maxChars: number): string {
  return text.length > maxChars ? `${text.slice(0, maxChars)}...` : text;
}

function fail(error: string): ToolCallParse {
  return { ok: false, error };
}
