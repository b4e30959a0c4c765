import { z } from 'zod';
import { renderAssistantText, type ChatFormat, type ModelConfig, type ToolCall, type ToolDefinition } from '@sqlenv/model';
import { AppError, ErrorCode, formatZodIssues } from '@sqlenv/shared';
import type { SequenceSample } from './micro-batches.ts';

/**
 * SFT data: one JSON object per line, in one of two forms.
 *
 * `{"input_ids": [...], "loss_mask": [...]}` is used as is: `loss_mask[i] = 1` makes token i a target,
 * predicted from the tokens before it (the Trajectory schema's convention; `sqlenv sft-data` writes it).
 *
 * `{"messages": [...], "tools": [...]}` (transformers / TRL conversation form; `sqlenv sft-data
 * --format messages` writes it) is rendered with the model's chat template the way the LLM agent
 * meets each turn (`renderSftMessages`), so training on the messages of an episode gives exactly the
 * ids and targets of the same episode in the first form.
 */

const ToolCallSchema = z.strictObject({
  type: z.literal('function').optional(),
  function: z.strictObject({ name: z.string().min(1), arguments: z.union([z.record(z.string(), z.unknown()), z.string()]) }),
});

const MessageSchema = z.discriminatedUnion('role', [
  z.strictObject({ role: z.enum(['system', 'user', 'tool']), content: z.string() }),
  z.strictObject({ role: z.literal('assistant'), content: z.string().nullable().default(''), tool_calls: z.array(ToolCallSchema).optional() }),
]);
export type SftMessage = z.infer<typeof MessageSchema>;

const IdsLineSchema = z.strictObject({
  input_ids: z.array(z.number().int().nonnegative()),
  loss_mask: z.array(z.union([z.literal(0), z.literal(1)])),
});

const MessagesLineSchema = z.strictObject({
  messages: z.array(MessageSchema).min(1),
  tools: z.array(z.record(z.string(), z.unknown())).default([]),
});

/** A parsed line: ids as given, or a conversation still to render. */
export type SftLine = { kind: 'ids'; sample: SequenceSample } | { kind: 'messages'; messages: SftMessage[]; tools: ToolDefinition[] };

/** Parse one line's JSON (no tokenizer needed yet); `label` names the line in errors. */
export function parseSftLine(text: string, label: string): SftLine {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (cause) {
    throw new AppError(ErrorCode.VALIDATION, `${label}: not valid JSON (${cause instanceof Error ? cause.message : String(cause)})`);
  }
  if (typeof json === 'object' && json !== null && 'messages' in json) {
    const parsed = MessagesLineSchema.safeParse(json);
    if (!parsed.success) throw new AppError(ErrorCode.VALIDATION, `${label}: not a {"messages": [...]} line: ${formatZodIssues(parsed.error)}`);
    return { kind: 'messages', messages: parsed.data.messages, tools: parsed.data.tools };
  }
  const parsed = IdsLineSchema.safeParse(json);
  if (!parsed.success) throw new AppError(ErrorCode.VALIDATION, `${label}: expected {"input_ids": [...], "loss_mask": [...]} or {"messages": [...]}: ${formatZodIssues(parsed.error)}`);
  return { kind: 'ids', sample: { inputIds: parsed.data.input_ids, lossMask: parsed.data.loss_mask } };
}

/**
 * A conversation as training ids, rendered turn by turn with the model's chat template exactly as
 * the LLM agent's context grows (chat-template.ts):
 *
 * - system turn (the first message if it is a system message) with the `tools` block: context;
 * - each user message `<|im_start|>user\n…<|im_end|>\n`: context;
 * - consecutive tool messages, one user turn of `<tool_response>` blocks: context;
 * - each assistant message: the generation prompt `<|im_start|>assistant\n` (plus Qwen3's empty think
 *   block `<think>\n\n</think>\n\n` when thinking is off and the template has one) is context; the
 *   reply — its content, then each tool call as `<tool_call>\n{"name": …, "arguments": …}\n</tool_call>`
 *   (newline-separated, as the template prints them) — and the closing `<|im_end|>` are the
 *   targets; the `\n` after `<|im_end|>` is context (and is left out after the last message).
 *
 * Only the assistant replies and their `<|im_end|>` have loss_mask 1. The think block is in every
 * assistant turn because that is what the agent saw when it wrote each reply; Qwen3's Jinja template,
 * re-rendering a whole conversation, drops it from all but the last turn.
 */
export function renderSftMessages(
  chat: ChatFormat,
  messages: readonly SftMessage[],
  tools: readonly ToolDefinition[],
  label = 'messages',
  systemCache?: Map<string, readonly number[]>,
): SequenceSample {
  const inputIds: number[] = [];
  const lossMask: number[] = [];
  const push = (ids: readonly number[], mask: 0 | 1): void => {
    for (const id of ids) {
      inputIds.push(id);
      lossMask.push(mask);
    }
  };
  let rest = messages;
  const first = messages[0];
  // The system block (prompt and tool schemas) is the same in every line of a file and is most of
  // each line's text: encoding it once per distinct block makes reading a large file several times faster.
  const system = (content: string | undefined): readonly number[] => {
    if (systemCache === undefined) return chat.systemIds(content, tools);
    const key = JSON.stringify([content ?? null, tools]);
    let ids = systemCache.get(key);
    if (ids === undefined) systemCache.set(key, (ids = chat.systemIds(content, tools)));
    return ids;
  };
  if (first?.role === 'system') {
    push(system(first.content), 0);
    rest = messages.slice(1);
  } else if (tools.length > 0) {
    push(system(undefined), 0);
  }
  const newline = chat.tokenizer.encode('\n');
  for (let i = 0; i < rest.length; i++) {
    const message = rest[i] as SftMessage;
    switch (message.role) {
      case 'system':
        throw new AppError(ErrorCode.VALIDATION, `${label}: a system message is only allowed first (message ${messages.indexOf(message)})`);
      case 'user':
        push(chat.userIds(message.content), 0);
        break;
      case 'tool': {
        const contents = [message.content];
        while (rest[i + 1]?.role === 'tool') contents.push((rest[++i] as { content: string }).content);
        push(chat.toolResponseIds(contents), 0);
        break;
      }
      case 'assistant': {
        push(chat.generationPromptIds(), 0);
        push([...chat.tokenizer.encode(assistantReplyText(message)), chat.imEndId], 1);
        if (i < rest.length - 1) push(newline, 0);
        break;
      }
    }
  }
  return { inputIds, lossMask };
}

/** The text of an assistant reply between the turn header and `<|im_end|>`, as the template prints it. */
function assistantReplyText(message: Extract<SftMessage, { role: 'assistant' }>): string {
  const calls: ToolCall[] = (message.tool_calls ?? []).map((c) => ({ name: c.function.name, arguments: c.function.arguments }));
  const text = renderAssistantText(message.content ?? '', calls);
  return text.slice('<|im_start|>assistant\n'.length, -'<|im_end|>\n'.length);
}

/**
 * Check a training sequence against the model: ids inside the vocabulary, loss_mask as long as the
 * ids, at least one target, the first token not a target, and the whole sequence within the
 * model's context (max_position_embeddings).
 */
export function checkSftSample(sample: SequenceSample, config: ModelConfig, label: string): void {
  const n = sample.inputIds.length;
  if (sample.lossMask.length !== n) throw new AppError(ErrorCode.VALIDATION, `${label}: loss_mask has ${sample.lossMask.length} entries for ${n} input_ids`);
  if (n < 2) throw new AppError(ErrorCode.VALIDATION, `${label}: needs at least 2 tokens, got ${n}`);
  if (n > config.maxPositionEmbeddings) throw new AppError(ErrorCode.VALIDATION, `${label}: ${n} tokens are more than the model's context of ${config.maxPositionEmbeddings}`);
  const bad = sample.inputIds.findIndex((id) => id >= config.vocabSize);
  if (bad >= 0) throw new AppError(ErrorCode.VALIDATION, `${label}: input_ids[${bad}] = ${sample.inputIds[bad]} is outside the vocabulary (${config.vocabSize})`);
  if (sample.lossMask[0] === 1) throw new AppError(ErrorCode.VALIDATION, `${label}: loss_mask[0] is 1, but nothing predicts the first token`);
  if (!sample.lossMask.some((m) => m === 1)) throw new AppError(ErrorCode.VALIDATION, `${label}: no targets (loss_mask has no 1; a messages line needs an assistant message)`);
}

/**
 * Every line of an SFT file as a checked training sequence. `loadChat` is called once, and only
 * when a messages line needs the chat template. Blank lines are skipped; errors name the line.
 */
export async function readSftExamples(text: string, options: { config: ModelConfig; loadChat: () => Promise<ChatFormat>; source?: string }): Promise<SequenceSample[]> {
  const source = options.source ?? 'data';
  const lines: Array<{ line: SftLine; label: string }> = [];
  text.split('\n').forEach((raw, index) => {
    if (raw.trim() === '') return;
    const label = `${source} line ${index + 1}`;
    lines.push({ line: parseSftLine(raw, label), label });
  });
  if (lines.length === 0) throw new AppError(ErrorCode.VALIDATION, `${source}: no data lines`);
  const chat = lines.some((l) => l.line.kind === 'messages') ? await options.loadChat() : undefined;
  const systemCache = new Map<string, readonly number[]>();
  return lines.map(({ line, label }) => {
    const sample = line.kind === 'ids' ? line.sample : renderSftMessages(chat as ChatFormat, line.messages, line.tools, label, systemCache);
    checkSftSample(sample, options.config, label);
    return sample;
  });
}
