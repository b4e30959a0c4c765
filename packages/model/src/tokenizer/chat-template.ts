import { AppError, ErrorCode, appendAll } from '@sqlenv/shared';
import type { TextTokenizer } from './tokenizer.ts';

/**
 * The Qwen2.5/Qwen3 chat template with tools, producing token ids turn by
 * turn (token-in/token-out, docs/async-rl.md): a conversation
 * grows by appending each new turn's ids; history is never re-rendered, so
 * the ids the policy sampled are exactly the ids it is trained on.
 *
 * Each turn's text is what the Jinja template in Qwen3's
 * tokenizer_config.json renders for it. Every turn starts with `<|im_start|>`
 * and the text between turns ends with `<|im_end|>\n`; special tokens split
 * the text before BPE, so encoding turn by turn gives the same ids as
 * encoding the whole rendered conversation (checked in the tests).
 */

/** A tool's JSON schema as the template prints it (`{"type": "function", "function": {...}}`). */
export type ToolDefinition = Readonly<Record<string, unknown>>;

export interface ToolCall {
  name: string;
  /** An object (printed with Python's json.dumps spacing) or an already-serialised string. */
  arguments: Readonly<Record<string, unknown>> | string;
}

export type ChatMessage =
  | { role: 'system'; content: string }
  | { role: 'user'; content: string }
  | { role: 'assistant'; content: string; toolCalls?: readonly ToolCall[] }
  | { role: 'tool'; content: string };

export interface ChatFormatOptions {
  /** Qwen3 thinking mode; false (default) puts an empty think block in the generation prompt. */
  enableThinking?: boolean;
  /** Qwen2.5 templates have no think block at all; set for Qwen2.5 checkpoints. Default false. */
  noThinkBlock?: boolean;
}

/**
 * Python's `json.dumps(value, ensure_ascii=False)`: `", "` and `": "`
 * separators, which is what the template's `tojson` filter prints
 * (transformers' chat-template `tojson`).
 */
export function pythonJsonDumps(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new AppError(ErrorCode.VALIDATION, `cannot serialise ${value} as JSON`);
    return JSON.stringify(value);
  }
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (Array.isArray(value)) return `[${value.map(pythonJsonDumps).join(', ')}]`;
  if (typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}: ${pythonJsonDumps(v)}`).join(', ')}}`;
  }
  throw new AppError(ErrorCode.VALIDATION, `cannot serialise a ${typeof value} as JSON`);
}

/** The system turn's text, with the tool block when tools are given. */
export function renderSystemText(system: string | undefined, tools: readonly ToolDefinition[]): string {
  if (tools.length === 0) return system === undefined ? '' : `<|im_start|>system\n${system}<|im_end|>\n`;
  const head = system === undefined ? '' : `${system}\n\n`;
  const toolLines = tools.map((tool) => `\n${pythonJsonDumps(tool)}`).join('');
  return (
    `<|im_start|>system\n${head}# Tools\n\nYou may call one or more functions to assist with the user query.\n\n` +
    `You are provided with function signatures within <tools></tools> XML tags:\n<tools>${toolLines}\n</tools>\n\n` +
    'For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n' +
    '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
  );
}

/** One `<tool_call>` block as the template prints it. */
export function renderToolCallText(call: ToolCall): string {
  const args = typeof call.arguments === 'string' ? call.arguments : pythonJsonDumps(call.arguments);
  return `<tool_call>\n{"name": "${call.name}", "arguments": ${args}}\n</tool_call>`;
}

/** An assistant turn rendered from a message (history, few-shot); sampled turns are appended as ids instead. */
export function renderAssistantText(content: string, toolCalls: readonly ToolCall[] = []): string {
  let text = `<|im_start|>assistant\n${content}`;
  toolCalls.forEach((call, i) => {
    if (i > 0 || content !== '') text += '\n';
    text += renderToolCallText(call);
  });
  return `${text}<|im_end|>\n`;
}

/** Consecutive tool results share one user turn. */
export function renderToolResponsesText(contents: readonly string[]): string {
  if (contents.length === 0) throw new AppError(ErrorCode.VALIDATION, 'a tool turn needs at least one response');
  return `<|im_start|>user${contents.map((c) => `\n<tool_response>\n${c}\n</tool_response>`).join('')}<|im_end|>\n`;
}

export class ChatFormat {
  readonly tokenizer: TextTokenizer;
  /** `<|im_end|>`: the end of every turn, the stop token of generation. */
  readonly imEndId: number;
  readonly endOfTextId: number;
  readonly #options: Required<ChatFormatOptions>;
  readonly #newlineIds: number[];

  constructor(tokenizer: TextTokenizer, options: ChatFormatOptions = {}) {
    this.tokenizer = tokenizer;
    this.#options = { enableThinking: options.enableThinking ?? false, noThinkBlock: options.noThinkBlock ?? false };
    this.imEndId = requireToken(tokenizer, '<|im_end|>');
    this.endOfTextId = requireToken(tokenizer, '<|endoftext|>');
    this.#newlineIds = tokenizer.encode('\n');
  }

  /** Ids that end a generated assistant turn. */
  get stopIds(): number[] {
    return [this.imEndId, this.endOfTextId];
  }

  /** Opening ids: the system turn (with tools), possibly empty. */
  systemIds(system: string | undefined, tools: readonly ToolDefinition[] = []): number[] {
    return this.tokenizer.encode(renderSystemText(system, tools));
  }

  userIds(content: string): number[] {
    return this.tokenizer.encode(`<|im_start|>user\n${content}<|im_end|>\n`);
  }

  toolResponseIds(contents: readonly string[]): number[] {
    return this.tokenizer.encode(renderToolResponsesText(contents));
  }

  assistantIds(content: string, toolCalls: readonly ToolCall[] = []): number[] {
    return this.tokenizer.encode(renderAssistantText(content, toolCalls));
  }

  /** `<|im_start|>assistant\n` (+ an empty think block with thinking off on Qwen3). */
  generationPromptIds(): number[] {
    const think = this.#options.enableThinking || this.#options.noThinkBlock ? '' : '<think>\n\n</think>\n\n';
    return this.tokenizer.encode(`<|im_start|>assistant\n${think}`);
  }

  /**
   * What follows a sampled assistant turn so the next turn can start: the
   * `<|im_end|>` the model did not emit (cut at max tokens) and the newline.
   * The sampled ids themselves are appended verbatim by the caller.
   */
  closeGeneratedTurnIds(generated: readonly number[]): number[] {
    const last = generated.at(-1);
    if (last === this.imEndId) return [...this.#newlineIds];
    if (last === this.endOfTextId) return [this.imEndId, ...this.#newlineIds];
    return [this.imEndId, ...this.#newlineIds];
  }

  /** A tool call's text as the template prints it in an assistant turn (no turn markers). */
  toolCallText(call: ToolCall): string {
    return renderToolCallText(call);
  }

  /** One message's ids (tool messages one at a time; use toolResponseIds to merge several). */
  messageIds(message: ChatMessage): number[] {
    switch (message.role) {
      case 'system':
        return this.systemIds(message.content);
      case 'user':
        return this.userIds(message.content);
      case 'assistant':
        return this.assistantIds(message.content, message.toolCalls);
      case 'tool':
        return this.toolResponseIds([message.content]);
    }
  }

  /**
   * A whole conversation from scratch, built by the same appends (consecutive
   * tool messages merged into one turn, like the template).
   */
  conversationIds(
    messages: readonly ChatMessage[],
    options: { tools?: readonly ToolDefinition[]; addGenerationPrompt?: boolean } = {},
  ): number[] {
    const tools = options.tools ?? [];
    const ids: number[] = [];
    let rest = messages;
    const first = messages[0];
    if (first?.role === 'system') {
      appendAll(ids, this.systemIds(first.content, tools));
      rest = messages.slice(1);
    } else if (tools.length > 0) {
      appendAll(ids, this.systemIds(undefined, tools));
    }
    for (let i = 0; i < rest.length; i++) {
      const message = rest[i] as ChatMessage;
      if (message.role !== 'tool') {
        appendAll(ids, this.messageIds(message));
        continue;
      }
      const contents = [message.content];
      while (rest[i + 1]?.role === 'tool') contents.push((rest[++i] as ChatMessage).content);
      appendAll(ids, this.toolResponseIds(contents));
    }
    if (options.addGenerationPrompt === true) appendAll(ids, this.generationPromptIds());
    return ids;
  }
}

function requireToken(tokenizer: TextTokenizer, token: string): number {
  const id = tokenizer.tokenId(token);
  if (id === undefined) throw new AppError(ErrorCode.MODEL, `tokenizer has no ${token} token: not a Qwen chat vocabulary`);
  return id;
}
