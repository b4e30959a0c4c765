import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { bundledQwenTokenizerPaths, ByteTokenizer, ChatFormat, loadBundledQwenTokenizer, type TextTokenizer } from '@sqlenv/model';
import type { SqlAction, SqlObservation } from '@sqlenv/protocol';
import { actionCompletionIds, actionToolCall } from './action-completion.ts';
import { DEFAULT_PROMPT_PATH, fillTemplate, loadAgentPrompt, parseAgentPrompt, renderFirstUser, renderToolResult } from './agent-prompt.ts';
import { ScriptedCompletionSource } from './completion-source.ts';
import { LlmPolicy } from './llm-policy.ts';

const prompt = loadAgentPrompt();
const PYTHON = process.env['SQLENV_PYTHON'] ?? 'python3';
const jinjaAvailable = spawnSync(PYTHON, ['-c', 'import jinja2'], { encoding: 'utf8' }).status === 0;
if (!jinjaAvailable) console.warn(`agent-prompt.test: skipping the Jinja comparison: ${PYTHON} cannot import jinja2 (set SQLENV_PYTHON to a Python with jinja2)`);

interface JinjaCase {
  messages: Array<Record<string, unknown>>;
  tools: readonly unknown[];
  add_generation_prompt: boolean;
  enable_thinking: boolean | null;
}

/** The real chat template (Qwen3's tokenizer_config.json) rendered by jinja2, as transformers does. */
function renderWithJinja(cases: JinjaCase[]): string[] {
  const run = spawnSync(PYTHON, [new URL('./testing/render-chat-template.py', import.meta.url).pathname], {
    input: JSON.stringify({ template_file: bundledQwenTokenizerPaths().tokenizerConfig, cases }),
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (run.status !== 0) throw new Error(`render-chat-template.py failed: ${run.stderr}`);
  return JSON.parse(run.stdout) as string[];
}

/** A scripted three-action episode on a made-up database (no SQL needed for the prompt). */
const actions: SqlAction[] = [
  { action_type: 'DESCRIBE', argument: 'singer' },
  { action_type: 'QUERY', argument: "SELECT count(*) FROM singer WHERE country = 'Frānce'" },
  { action_type: 'ANSWER', argument: '6' },
];
const observations: SqlObservation[] = [
  { question: 'How many singers are from Frānce? 日本', schema_info: 'Tables:\n- singer\n- concert', result: '', error: '', step_count: 0, budget_remaining: 15, action_history: [] },
  { question: 'q', schema_info: 's', result: 'Table singer: 3 rows, 2 columns\ncolumn | type\nname | TEXT', error: '', step_count: 1, budget_remaining: 14, action_history: [] },
  { question: 'q', schema_info: 's', result: '', error: 'no such column: country', step_count: 2, budget_remaining: 13, action_history: [] },
];

async function playScripted(chat: ChatFormat): Promise<Array<{ prompt: number[]; completion: number[] }>> {
  const source = new ScriptedCompletionSource((request) => actionCompletionIds(actions[request.turn] as SqlAction, prompt, chat), { stopIds: chat.stopIds });
  const policy = new LlmPolicy({ chat, prompt, source, maxNewTokens: 200, contextTokens: 100_000 });
  const episode = policy.begin({ episodeId: 'e', questionId: 'q', dbId: 'd', seed: 1 });
  const turns: Array<{ prompt: number[]; completion: number[] }> = [];
  for (const [i, observation] of observations.entries()) {
    expect(await episode.act(observation)).toEqual(actions[i]);
    const tokens = episode.takeTurnTokens();
    if (tokens === null) throw new Error('no tokens');
    turns.push({ prompt: tokens.prompt_ids, completion: tokens.completion_ids });
  }
  return turns;
}

function jinjaMessages(upTo: number, withLastTool: boolean): Array<Record<string, unknown>> {
  const messages: Array<Record<string, unknown>> = [
    { role: 'system', content: prompt.system },
    { role: 'user', content: renderFirstUser(prompt, observations[0] as SqlObservation) },
  ];
  for (let k = 0; k < upTo; k++) {
    messages.push({ role: 'assistant', content: '', tool_calls: [{ type: 'function', function: actionToolCall(actions[k] as SqlAction, prompt) }] });
    if (k < upTo - 1 || withLastTool) messages.push({ role: 'tool', content: renderToolResult(prompt, observations[k + 1] as SqlObservation) });
  }
  return messages;
}

let qwen: TextTokenizer;
beforeAll(async () => {
  qwen = await loadBundledQwenTokenizer();
});

describe('the prompt file', () => {
  it('declares the four tools with one parameter each', () => {
    expect(prompt.tools.map((t) => [t.name, t.actionType, t.parameter])).toEqual([
      ['describe', 'DESCRIBE', 'table'],
      ['sample', 'SAMPLE', 'table'],
      ['query', 'QUERY', 'sql'],
      ['answer', 'ANSWER', 'value'],
    ]);
    expect(prompt.system).toMatch(/^Answer the question/);
    expect(renderToolResult(prompt, observations[2] as SqlObservation)).toBe('Error: no such column: country\n(13 steps left)');
  });

  it('refuses a file with a missing or unknown section, a bad tool or an unknown placeholder, naming it', () => {
    const text = readFileSync(DEFAULT_PROMPT_PATH, 'utf8');
    expect(() => parseAgentPrompt(text.replace('## error\n', '## errors\n'), 'p.md')).toThrow("p.md: unknown section '## errors'");
    expect(() => parseAgentPrompt(text.replace(/\n## parse_error\n[\s\S]*$/, ''), 'p.md')).toThrow("p.md: missing section(s) '## parse_error'");
    expect(() => parseAgentPrompt(text.replace('"name": "sample"', '"name": "drop"'), 'p.md')).toThrow("tool 'drop' is none of describe, sample, query, answer");
    expect(() => parseAgentPrompt(text.replace('{"sql": {"type": "string"}}', '{"sql": {"type": "string"}, "x": {"type": "string"}}'), 'p.md')).toThrow('exactly one string parameter');
    expect(() => parseAgentPrompt(text.replace('## user\n{question}', '## user\n{questoin}'), 'p.md')).toThrow('p.md ## user: unknown placeholder {questoin}');
    expect(() => parseAgentPrompt(text.replace('{"type": "function", "function": {"name": "answer"', 'not json {'), 'p.md')).toThrow('not one JSON object per line');
    expect(() => loadAgentPrompt('/no/such/prompt.md')).toThrow('cannot read prompt file /no/such/prompt.md');
    expect(fillTemplate('{{x}} {a} {b}', { a: '{b}', b: 2 })).toBe('{x} {b} 2');
  });

  it('renders the first prompt token-identically to the Qwen3 Jinja template (thinking off)', async () => {
    const chat = new ChatFormat(qwen);
    const turns = await playScripted(chat);
    const first = turns[0]?.prompt ?? [];
    if (!jinjaAvailable) return;
    const [rendered] = renderWithJinja([{ messages: jinjaMessages(0, false), tools: prompt.tools.map((t) => t.definition), add_generation_prompt: true, enable_thinking: false }]);
    expect(qwen.decode(first)).toBe(rendered);
    expect(first).toEqual(qwen.encode(rendered as string));
    // Later turns: each tool response + generation prompt is the template's, and each assistant
    // turn is what the template renders for it as the latest turn (Qwen3 drops earlier turns' empty
    // think blocks when it re-renders a conversation: why trajectories keep ids, not messages).
    const cases = [1, 2].flatMap((k) => [
      { messages: jinjaMessages(k, true), tools: prompt.tools.map((t) => t.definition), add_generation_prompt: true, enable_thinking: false },
      { messages: jinjaMessages(k, false), tools: prompt.tools.map((t) => t.definition), add_generation_prompt: false, enable_thinking: false },
    ]);
    const texts = renderWithJinja(cases);
    for (const k of [1, 2]) {
      const withTool = texts[(k - 1) * 2] as string;
      const endingInAssistant = texts[(k - 1) * 2 + 1] as string;
      const turnPrompt = turns[k]?.prompt ?? [];
      const toolTurn = withTool.slice(withTool.lastIndexOf('<|im_start|>user'));
      expect(qwen.decode(turnPrompt)).toBe(`\n${toolTurn}`);
      expect(turnPrompt.slice(1)).toEqual(qwen.encode(toolTurn));
      const assistantTurn = endingInAssistant.slice(endingInAssistant.lastIndexOf('<|im_start|>assistant'));
      const previous = turns[k - 1] as { prompt: number[]; completion: number[] };
      const generationPrompt = chat.generationPromptIds();
      expect(previous.prompt.slice(-generationPrompt.length)).toEqual(generationPrompt);
      expect([...generationPrompt, ...previous.completion, ...turnPrompt.slice(0, 1)]).toEqual(qwen.encode(assistantTurn));
    }
  });

  it('without a think block, the whole conversation is token-identical to the template at every turn', async () => {
    for (const tokenizer of [qwen, new ByteTokenizer()]) {
      const chat = new ChatFormat(tokenizer, { noThinkBlock: true });
      const turns = await playScripted(chat);
      if (!jinjaAvailable) continue;
      const texts = renderWithJinja([0, 1, 2].map((k) => ({ messages: jinjaMessages(k, true), tools: prompt.tools.map((t) => t.definition), add_generation_prompt: true, enable_thinking: null })));
      let ids: number[] = [];
      for (const k of [0, 1, 2]) {
        ids = [...ids, ...(turns[k]?.prompt ?? [])];
        expect(tokenizer.decode(ids)).toBe(texts[k]);
        expect(ids).toEqual(tokenizer.encode(texts[k] as string));
        ids = [...ids, ...(turns[k]?.completion ?? [])];
      }
    }
  });
});
