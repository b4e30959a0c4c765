import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { ByteTokenizer, BYTE_SPECIAL_IDS } from './byte-tokenizer.ts';
import { ChatFormat, pythonJsonDumps, type ChatMessage, type ToolCall, type ToolDefinition } from './chat-template.ts';
import { loadBundledQwenTokenizer, type HfTokenizer } from './hf-tokenizer.ts';

// Expected texts rendered by jinja2 from the real Qwen3 template (see render-chat-template.py).
interface Fixture {
  tools: ToolDefinition[];
  conversation: { role: ChatMessage['role']; content: string; tool_calls?: { function: ToolCall }[] }[];
  cases: Record<'tools_first_turn' | 'tools_conversation' | 'no_tools' | 'tools_no_system', string>;
}
const fixture = JSON.parse(
  readFileSync(new URL('../testing/qwen3-chat-template.json', import.meta.url), 'utf8'),
) as Fixture;
const conversation: ChatMessage[] = fixture.conversation.map((m) =>
  m.role === 'assistant'
    ? { role: 'assistant', content: m.content, toolCalls: (m.tool_calls ?? []).map((c) => c.function) }
    : { role: m.role, content: m.content },
);

let qwen: HfTokenizer;
beforeAll(async () => {
  qwen = await loadBundledQwenTokenizer();
});

describe('Qwen tokenizer (real tokenizer.json)', () => {
  it('maps the chat special tokens to the documented ids', () => {
    const expected = {
      '<|endoftext|>': 151643, '<|im_start|>': 151644, '<|im_end|>': 151645, '<tool_call>': 151657,
      '</tool_call>': 151658, '<tool_response>': 151665, '</tool_response>': 151666, '<think>': 151667, '</think>': 151668,
    };
    for (const [token, id] of Object.entries(expected)) {
      expect(qwen.tokenId(token)).toBe(id);
      expect(qwen.encode(token)).toEqual([id]);
    }
    expect(qwen.vocabSize).toBe(151669);
  });

  it('encodes plain text with byte-level BPE and round-trips it', () => {
    // Ids looked up in the vocab of tokenizer.json: "Hello" = 9707, "Ġworld" = 1879.
    expect(qwen.encode('Hello world')).toEqual([9707, 1879]);
    const text = "SELECT name FROM singer WHERE country = 'Frānce' -- 日本\n\n";
    expect(qwen.decode(qwen.encode(text))).toBe(text);
    expect(qwen.decode([151644, 872], { skipSpecialTokens: true })).toBe('user');
  });
});

describe('ChatFormat on the real Qwen3 template', () => {
  it('renders the first turn with tools exactly like the Jinja template', () => {
    const chat = new ChatFormat(qwen);
    const ids = chat.conversationIds(conversation.slice(0, 2), { tools: fixture.tools, addGenerationPrompt: true });
    expect(ids).toEqual(qwen.encode(fixture.cases.tools_first_turn));
    expect(qwen.decode(ids)).toBe(fixture.cases.tools_first_turn);
  });

  it('renders tool calls, merged tool responses and a later call like the template', () => {
    const chat = new ChatFormat(qwen);
    const ids = chat.conversationIds(conversation, { tools: fixture.tools, addGenerationPrompt: true });
    expect(qwen.decode(ids)).toBe(fixture.cases.tools_conversation);
    expect(ids).toEqual(qwen.encode(fixture.cases.tools_conversation));
  });

  it('renders without tools and with thinking on', () => {
    const chat = new ChatFormat(qwen, { enableThinking: true });
    expect(chat.conversationIds(conversation.slice(0, 2), { addGenerationPrompt: true })).toEqual(
      qwen.encode(fixture.cases.no_tools),
    );
    expect(chat.conversationIds(conversation.slice(1, 2), { tools: fixture.tools })).toEqual(
      qwen.encode(fixture.cases.tools_no_system),
    );
  });

  it('appends turns token-in/token-out: sampled ids are kept verbatim, history is never re-encoded', () => {
    const chat = new ChatFormat(qwen);
    const ids = [...chat.systemIds('sys', fixture.tools), ...chat.userIds('q'), ...chat.generationPromptIds()];
    const prefix = [...ids];
    // A "sampled" turn whose ids are NOT the canonical encoding of its text ("Hel"+"lo" vs "Hello").
    const sampled = [...qwen.encode('Hel'), ...qwen.encode('lo'), chat.imEndId];
    ids.push(...sampled, ...chat.closeGeneratedTurnIds(sampled), ...chat.toolResponseIds(['[[1]]']), ...chat.generationPromptIds());
    expect(ids.slice(0, prefix.length)).toEqual(prefix);
    expect(ids.slice(prefix.length, prefix.length + sampled.length)).toEqual(sampled);
    expect(qwen.decode(ids.slice(prefix.length))).toBe(
      'Hello<|im_end|>\n<|im_start|>user\n<tool_response>\n[[1]]\n</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n',
    );
    // A turn cut at max tokens gets its <|im_end|> closed for it.
    expect(chat.closeGeneratedTurnIds(qwen.encode('Hel'))).toEqual([chat.imEndId, ...qwen.encode('\n')]);
  });
});

describe('byte tokenizer', () => {
  it('encodes UTF-8 bytes and chat special tokens, and decodes them back', () => {
    const tok = new ByteTokenizer();
    const text = '<|im_start|>user\nhé 日本<tool_call></tool_call><|im_end|>\n';
    const ids = tok.encode(text);
    expect(ids[0]).toBe(BYTE_SPECIAL_IDS['<|im_start|>']);
    expect(ids.slice(1, 5)).toEqual([117, 115, 101, 114]);
    expect(ids.filter((id) => id >= 256)).toEqual([256 + 1, 256 + 3, 256 + 4, 256 + 2]);
    expect(tok.decode(ids)).toBe(text);
    expect(tok.decode(ids, { skipSpecialTokens: true })).toBe('user\nhé 日本\n');
    expect(Math.max(...ids)).toBeLessThan(tok.vocabSize);
  });

  it('drives the same chat format', () => {
    const chat = new ChatFormat(new ByteTokenizer());
    const ids = chat.conversationIds(conversation.slice(0, 2), { tools: fixture.tools, addGenerationPrompt: true });
    expect(new ByteTokenizer().decode(ids)).toBe(fixture.cases.tools_first_turn);
    expect(chat.stopIds).toEqual([BYTE_SPECIAL_IDS['<|im_end|>'], BYTE_SPECIAL_IDS['<|endoftext|>']]);
  });
});

describe('pythonJsonDumps', () => {
  it('uses Python json.dumps spacing and keeps non-ASCII', () => {
    expect(pythonJsonDumps({ a: [1, 'é', null, true], b: { c: 'x"y' } })).toBe('{"a": [1, "é", null, true], "b": {"c": "x\\"y"}}');
  });
});
