import { describe, expect, it } from 'vitest';
import { ByteTokenizer, ChatFormat, presetConfig } from '@sqlenv/model';
import { checkSftSample, parseSftLine, readSftExamples, renderSftMessages, type SftMessage } from './sft-examples.ts';
import { sftBatchLines } from './sft-run.ts';

const config = presetConfig('tiny-qwen3');
const tokenizer = new ByteTokenizer();
const qwen3 = new ChatFormat(tokenizer); // Qwen3 template, thinking off: an empty think block in each generation prompt
const qwen25 = new ChatFormat(tokenizer, { noThinkBlock: true });
const tools = [{ type: 'function', function: { name: 'query', description: 'Run SQL', parameters: { type: 'object', properties: { sql: { type: 'string' } } } } }];

const conversation: SftMessage[] = [
  { role: 'system', content: 'You answer with SQL.' },
  { role: 'user', content: 'How many?' },
  { role: 'assistant', content: '', tool_calls: [{ type: 'function', function: { name: 'query', arguments: { sql: 'SELECT 1' } } }] },
  { role: 'tool', content: '1' },
  { role: 'assistant', content: 'It is 1.' },
];

/** The text of each maximal run of tokens with the given mask value. */
function spans(ids: readonly number[], mask: readonly number[], value: number): string[] {
  const out: string[] = [];
  let current: number[] = [];
  ids.forEach((id, i) => {
    if (mask[i] === value) current.push(id);
    else if (current.length > 0) {
      out.push(tokenizer.decode(current));
      current = [];
    }
  });
  if (current.length > 0) out.push(tokenizer.decode(current));
  return out;
}

describe('renderSftMessages', () => {
  it("targets exactly each assistant reply and its <|im_end|>; the rest is context, as the agent's turns are built", () => {
    const sample = renderSftMessages(qwen3, conversation, tools);
    expect(sample.lossMask).toHaveLength(sample.inputIds.length);
    expect(spans(sample.inputIds, sample.lossMask, 1)).toEqual([
      '<tool_call>\n{"name": "query", "arguments": {"sql": "SELECT 1"}}\n</tool_call><|im_end|>',
      'It is 1.<|im_end|>',
    ]);
    const context = spans(sample.inputIds, sample.lossMask, 0);
    expect(context).toHaveLength(2);
    expect(context[0]).toMatch(/^<\|im_start\|>system\nYou answer with SQL\.\n\n# Tools\n[\s\S]*"name": "query"[\s\S]*<\|im_end\|>\n<\|im_start\|>user\nHow many\?<\|im_end\|>\n<\|im_start\|>assistant\n<think>\n\n<\/think>\n\n$/);
    expect(context[1]).toBe('\n<|im_start|>user\n<tool_response>\n1\n</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n');
    // The ids are the turn-by-turn concatenation the agent builds (no newline after the last <|im_end|>).
    expect(sample.inputIds).toEqual([
      ...qwen3.systemIds('You answer with SQL.', tools),
      ...qwen3.userIds('How many?'),
      ...qwen3.generationPromptIds(),
      ...tokenizer.encode(qwen3.toolCallText({ name: 'query', arguments: { sql: 'SELECT 1' } })),
      qwen3.imEndId,
      ...qwen3.closeGeneratedTurnIds([qwen3.imEndId]),
      ...qwen3.toolResponseIds(['1']),
      ...qwen3.generationPromptIds(),
      ...tokenizer.encode('It is 1.'),
      qwen3.imEndId,
    ]);
  });

  it('a Qwen2.5-style template has no think block; thinking on leaves it to the model', () => {
    const text = tokenizer.decode(renderSftMessages(qwen25, conversation.slice(1, 3), []).inputIds);
    expect(text).toBe('<|im_start|>user\nHow many?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{"name": "query", "arguments": {"sql": "SELECT 1"}}\n</tool_call><|im_end|>');
    const thinking = new ChatFormat(tokenizer, { enableThinking: true });
    expect(tokenizer.decode(renderSftMessages(thinking, conversation.slice(1, 3), []).inputIds)).not.toContain('<think>');
  });

  it('merges consecutive tool messages into one turn, prints text before tool calls, and refuses a late system message', () => {
    const sample = renderSftMessages(qwen25, [
      { role: 'user', content: 'q' },
      { role: 'assistant', content: 'Let me look.', tool_calls: [{ function: { name: 'a', arguments: '{"x": 1}' } }, { function: { name: 'b', arguments: {} } }] },
      { role: 'tool', content: 'r1' },
      { role: 'tool', content: 'r2' },
      { role: 'assistant', content: null },
    ], []);
    expect(spans(sample.inputIds, sample.lossMask, 1)).toEqual([
      'Let me look.\n<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n</tool_call>\n<tool_call>\n{"name": "b", "arguments": {}}\n</tool_call><|im_end|>',
      '<|im_end|>',
    ]);
    expect(spans(sample.inputIds, sample.lossMask, 0)[1]).toBe('\n<|im_start|>user\n<tool_response>\nr1\n</tool_response>\n<tool_response>\nr2\n</tool_response><|im_end|>\n<|im_start|>assistant\n');
    expect(() => renderSftMessages(qwen25, [{ role: 'user', content: 'q' }, { role: 'system', content: 's' }], [], 'f line 3')).toThrow(/f line 3: a system message is only allowed first/);
  });
});

describe('SFT lines', () => {
  it('parses both forms and names the line in every error', () => {
    expect(parseSftLine('{"input_ids": [1, 2, 3], "loss_mask": [0, 1, 1]}', 'l1')).toEqual({ kind: 'ids', sample: { inputIds: [1, 2, 3], lossMask: [0, 1, 1] } });
    expect(parseSftLine('{"messages": [{"role": "user", "content": "hi"}]}', 'l1')).toMatchObject({ kind: 'messages', tools: [] });
    expect(() => parseSftLine('{"input_ids": [1, 2', 'f line 4')).toThrow(/^f line 4: not valid JSON/);
    expect(() => parseSftLine('{"input_ids": [1, 2], "loss_mask": [0, 2]}', 'f line 2')).toThrow(/^f line 2: expected \{"input_ids"/);
    expect(() => parseSftLine('{"input_ids": [1, 2], "loss_mask": [0, 1], "extra": 1}', 'f line 2')).toThrow(/extra/);
    expect(() => parseSftLine('{"messages": [{"role": "robot", "content": "x"}]}', 'f line 5')).toThrow(/^f line 5: not a \{"messages"/);
    expect(() => parseSftLine('{"messages": [{"role": "assistant", "content": "x", "reasoning_content": "y"}]}', 'f line 6')).toThrow(/reasoning_content/);
  });

  it('checks each sequence against the model: lengths, targets, vocabulary, context', () => {
    const ok = { inputIds: [1, 2, 3], lossMask: [0, 1, 1] };
    expect(() => checkSftSample(ok, config, 'x')).not.toThrow();
    expect(() => checkSftSample({ inputIds: [1, 2, 3], lossMask: [0, 1] }, config, 'f line 7')).toThrow('f line 7: loss_mask has 2 entries for 3 input_ids');
    expect(() => checkSftSample({ inputIds: [1, 2, 3], lossMask: [0, 0, 0] }, config, 'f line 7')).toThrow(/f line 7: no targets/);
    expect(() => checkSftSample({ inputIds: [1, 2, 3], lossMask: [1, 0, 1] }, config, 'f line 7')).toThrow(/loss_mask\[0\] is 1/);
    expect(() => checkSftSample({ inputIds: [1, 999, 3], lossMask: [0, 1, 1] }, config, 'f line 7')).toThrow(/input_ids\[1\] = 999 is outside the vocabulary \(272\)/);
    const long = config.maxPositionEmbeddings + 1;
    expect(() => checkSftSample({ inputIds: Array(long).fill(1), lossMask: [0, ...Array(long - 1).fill(1)] }, config, 'f line 7')).toThrow(`f line 7: ${long} tokens are more than the model's context of ${config.maxPositionEmbeddings}`);
  });

  it('readSftExamples: mixed forms, blank lines skipped, the chat template loaded only when a messages line needs it', async () => {
    let loads = 0;
    const loadChat = async (): Promise<ChatFormat> => {
      loads++;
      return qwen3;
    };
    const idsOnly = '{"input_ids": [1, 2, 3], "loss_mask": [0, 1, 1]}\n\n{"input_ids": [4, 5], "loss_mask": [0, 1]}\n';
    expect(await readSftExamples(idsOnly, { config, loadChat })).toHaveLength(2);
    expect(loads).toBe(0);
    const mixed = `${idsOnly}${JSON.stringify({ messages: conversation, tools })}\n`;
    const examples = await readSftExamples(mixed, { config, loadChat, source: 'f.jsonl' });
    expect(loads).toBe(1);
    expect(examples[2]).toEqual(renderSftMessages(qwen3, conversation, tools));
    // Lines that share a system block (encoded once per file) and one with another: each as rendered alone.
    const other = [{ ...conversation[0], content: 'Another system prompt.' } as SftMessage, ...conversation.slice(1)];
    const shared = [conversation, conversation, other, [...conversation.slice(1)]].map((messages) => JSON.stringify({ messages, tools })).join('\n');
    expect(await readSftExamples(shared, { config, loadChat })).toEqual([conversation, conversation, other, conversation.slice(1)].map((m) => renderSftMessages(qwen3, m, tools)));
    await expect(readSftExamples(`${idsOnly}{"messages": [{"role": "user", "content": "no answer"}]}\n`, { config, loadChat, source: 'f.jsonl' })).rejects.toThrow(/^f\.jsonl line 4: no targets/);
    await expect(readSftExamples('\n\n', { config, loadChat, source: 'f.jsonl' })).rejects.toThrow('f.jsonl: no data lines');
  });

  it('step k takes the next B lines in file order, wrapping', () => {
    expect([0, 1, 2].map((k) => sftBatchLines(5, 2, k))).toEqual([[0, 1], [2, 3], [4, 0]]);
    expect(sftBatchLines(2, 5, 0)).toEqual([0, 1, 0, 1, 0]);
    expect(sftBatchLines(3, 3, 7)).toEqual([0, 1, 2]);
    // Shuffled: every epoch is a permutation of all lines, epochs differ, the seed decides the order.
    const epoch = (e: number, seed: number): number[] => sftBatchLines(50, 50, e, seed);
    expect([...epoch(0, 1)].sort((a, b) => a - b)).toEqual(Array.from({ length: 50 }, (_, i) => i));
    expect(epoch(0, 1)).not.toEqual(Array.from({ length: 50 }, (_, i) => i));
    expect(epoch(1, 1)).not.toEqual(epoch(0, 1));
    expect(epoch(0, 2)).not.toEqual(epoch(0, 1));
    expect(epoch(0, 1)).toEqual(epoch(0, 1));
    // Batches that straddle an epoch boundary take the end of one permutation and the start of the next.
    expect(sftBatchLines(50, 20, 2, 1)).toEqual([...epoch(0, 1).slice(40), ...epoch(1, 1).slice(0, 10)]);
  });
});
