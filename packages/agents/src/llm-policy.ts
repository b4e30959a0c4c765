import { PARSE_ERROR_ACTION, type SqlAction, type SqlObservation } from '@sqlenv/protocol';
import { AppError, ErrorCode, appendAll, mixSeeds } from '@sqlenv/shared';
import type { ChatFormat, ToolDefinition } from '@sqlenv/model';
import { fillTemplate, renderFirstUser, renderToolResult, type AgentPrompt } from './agent-prompt.ts';
import type { Completion, CompletionSource, EpisodeCompleter } from './completion-source.ts';
import type { EpisodeContext, Policy, PolicyLane, PolicyMove, TokenRecordingEpisode, TurnTokens } from './policy.ts';
import { actionToolCall } from './action-completion.ts';
import { parseToolCall } from './tool-call-parser.ts';

export interface LlmPolicyOptions {
  /** The model's tokenizer and chat template (`loadChatFormat(dir)`). */
  chat: ChatFormat;
  prompt: AgentPrompt;
  source: CompletionSource;
  /** Most new tokens per turn; a turn also stops at `<|im_end|>`. */
  maxNewTokens: number;
  /** Tokens of the whole episode: prompt, observations and completions (the context limit). */
  contextTokens: number;
  /** Name in reports and trajectories. Default 'model'. */
  name?: string;
}

/**
 * The LLM agent: the system prompt with the four tools (Qwen tool format) and
 * the question as the first user turn, observations back as tool responses,
 * one tool call parsed from each reply. Token-in/token-out: the context is
 * the concatenation of the ids appended each turn and the ids sampled, never
 * re-rendered; each turn's ids, loss mask, log-probs and adapter version are
 * handed to the episode runner (`takeTurnTokens`).
 *
 * Budgets: each turn may write `maxNewTokens`, or fewer when the context is
 * nearly full; when the next prompt leaves no room for even one new token the
 * episode stops with `context_exhausted` (no crash, nothing sampled). A reply
 * with no valid tool call becomes a PARSE_ERROR action: the environment shows
 * the reason, charges the format penalty and one step of the budget.
 */
export class LlmPolicy implements Policy {
  readonly name: string;
  readonly #options: LlmPolicyOptions;
  readonly #systemIds: number[];
  readonly #toolDefinitions: ToolDefinition[];

  constructor(options: LlmPolicyOptions) {
    if (!Number.isInteger(options.maxNewTokens) || options.maxNewTokens < 1) throw new AppError(ErrorCode.VALIDATION, `maxNewTokens must be an integer ≥ 1, got ${options.maxNewTokens}`);
    if (!Number.isInteger(options.contextTokens) || options.contextTokens < 1) throw new AppError(ErrorCode.VALIDATION, `contextTokens must be an integer ≥ 1, got ${options.contextTokens}`);
    this.name = options.name ?? 'model';
    this.#options = options;
    this.#toolDefinitions = options.prompt.tools.map((t) => t.definition);
    // The system turn is the same for every episode: encode it once.
    this.#systemIds = systemTurnIds(options.chat, options.prompt);
    checkContextHoldsSystemTurn(options.chat, this.#systemIds, options.contextTokens);
  }

  /** The tool schemas as printed in the system turn. */
  get tools(): readonly ToolDefinition[] {
    return this.#toolDefinitions;
  }

  /** Ids of the system turn (system prompt + tools), shared by every episode. */
  get systemIds(): readonly number[] {
    return this.#systemIds;
  }

  /** The completion source's lane (the engine's: lockstep on a deterministic engine); one that holds nothing for a source without lanes. */
  openLane(): PolicyLane {
    return this.#options.source.openLane?.() ?? { close: () => undefined };
  }

  begin(context: EpisodeContext): LlmEpisode {
    return new LlmEpisode(this.#options, this.#systemIds, context, this.#options.source.episode(context));
  }
}

/** Ids of the system turn (system prompt + tool definitions) every episode of `prompt` starts with. */
export function systemTurnIds(chat: ChatFormat, prompt: AgentPrompt): number[] {
  return chat.systemIds(prompt.system === '' ? undefined : prompt.system, prompt.tools.map((t) => t.definition));
}

/**
 * Refuse a context that cannot hold the system turn and the generation prompt with room for one new
 * token: every episode would stop at `context_exhausted` before sampling anything, and a run would
 * report success 0 as if the model had failed.
 */
export function checkContextHoldsSystemTurn(chat: ChatFormat, systemIds: readonly number[], contextTokens: number): void {
  const firstPromptTokens = systemIds.length + chat.generationPromptIds().length;
  if (firstPromptTokens < contextTokens) return;
  throw new AppError(
    ErrorCode.VALIDATION,
    `the system prompt (with its tool definitions) is ${systemIds.length} tokens, ${firstPromptTokens} with the generation prompt, and the context holds ${contextTokens} tokens (the smaller of --context-tokens and the model's max_position_embeddings): no episode could sample one token`,
    { details: { systemTokens: systemIds.length, contextTokens } },
  );
}

/**
 * A conversation message in the form chat templates and SFT tools read
 * (transformers / TRL): tool calls as `{type: 'function', function: {name, arguments}}`.
 */
export type AgentMessage =
  | { role: 'system' | 'user' | 'tool'; content: string }
  | { role: 'assistant'; content: string; tool_calls?: Array<{ type: 'function'; function: { name: string; arguments: Record<string, unknown> } }> };

/** One episode of the LLM agent (see LlmPolicy). */
export class LlmEpisode implements TokenRecordingEpisode {
  readonly #options: LlmPolicyOptions;
  readonly #systemIds: readonly number[];
  readonly #context: EpisodeContext;
  readonly #completer: EpisodeCompleter;
  /** Every id fed or sampled so far, in order. */
  readonly #ids: number[] = [];
  #turn = 0;
  #lastCompletion: number[] | null = null;
  #pending: TurnTokens | null = null;
  readonly #messages: AgentMessage[] = [];

  constructor(options: LlmPolicyOptions, systemIds: readonly number[], context: EpisodeContext, completer: EpisodeCompleter) {
    this.#options = options;
    this.#systemIds = systemIds;
    this.#context = context;
    this.#completer = completer;
  }

  /**
   * The conversation as messages (system, user, assistant, tool, ...). An assistant reply that is
   * exactly one tool call as the template prints it is given as `tool_calls`, else as `content`.
   * The ids (`contextIds`, the turns' tokens) are the truth; this is for SFT files and transcripts.
   */
  get messages(): readonly AgentMessage[] {
    return this.#messages;
  }

  /** Ids of the conversation so far (what the model has seen and written). */
  get contextIds(): readonly number[] {
    return this.#ids;
  }

  async act(observation: SqlObservation): Promise<PolicyMove> {
    const { chat, prompt, contextTokens } = this.#options;
    this.#pending = null;
    const first = this.#lastCompletion === null;
    // The observation as this turn's text: the first user turn, then tool responses.
    const shown = first ? renderFirstUser(prompt, observation) : renderToolResult(prompt, observation);
    const promptIds = this.#lastCompletion === null
      ? [...this.#systemIds, ...chat.userIds(shown), ...chat.generationPromptIds()]
      : [...chat.closeGeneratedTurnIds(this.#lastCompletion), ...chat.toolResponseIds([shown]), ...chat.generationPromptIds()];
    const room = contextTokens - this.#ids.length - promptIds.length;
    if (room < 1) {
      return { stop: 'context_exhausted', detail: `${this.#ids.length} tokens so far + ${promptIds.length} for the next prompt leave no room in ${contextTokens}` };
    }
    const turn = this.#turn++;
    if (first && prompt.system !== '') this.#messages.push({ role: 'system', content: prompt.system });
    this.#messages.push({ role: first ? 'user' : 'tool', content: shown });
    const completion = await this.#completer.complete({
      promptIds: [...this.#ids, ...promptIds],
      maxNewTokens: Math.min(this.#options.maxNewTokens, room),
      seed: mixSeeds(this.#context.seed, turn),
      turn,
      observation,
    });
    checkCompletion(completion, Math.min(this.#options.maxNewTokens, room));
    appendAll(appendAll(this.#ids, promptIds), completion.tokens);
    this.#lastCompletion = completion.tokens;
    const text = chat.tokenizer.decode(completion.tokens);
    const parsed = completion.tokens.length === 0 ? { ok: false as const, error: 'empty reply' } : parseToolCall(text, prompt.tools, { truncated: completion.finishReason === 'length' });
    this.#pending = {
      prompt_ids: promptIds,
      completion_ids: completion.tokens,
      loss_mask: [...promptIds.map((): 0 => 0), ...completion.tokens.map((): 1 => 1)],
      logprobs: completion.logprobs,
      parse_error: parsed.ok ? null : parsed.error,
      policy_version: completion.policyVersion,
      text,
    };
    this.#messages.push(assistantMessage(text, parsed.ok ? parsed.action : null, prompt, chat));
    if (parsed.ok) return parsed.action;
    const action: SqlAction = { action_type: PARSE_ERROR_ACTION, argument: fillTemplate(prompt.parseError, { reason: parsed.error }) };
    return action;
  }

  close(): void {
    this.#completer.close?.();
  }

  takeTurnTokens(): TurnTokens | null {
    const pending = this.#pending;
    this.#pending = null;
    return pending;
  }
}

function assistantMessage(text: string, action: SqlAction | null, prompt: AgentPrompt, chat: ChatFormat): AgentMessage {
  const content = text.endsWith('<|im_end|>') ? text.slice(0, -'<|im_end|>'.length) : text;
  if (action !== null) {
    const call = actionToolCall(action, prompt);
    if (chat.toolCallText(call) === content) return { role: 'assistant', content: '', tool_calls: [{ type: 'function', function: { name: call.name, arguments: call.arguments as Record<string, unknown> } }] };
  }
  return { role: 'assistant', content };
}

function checkCompletion(completion: Completion, maxNewTokens: number): void {
  if (completion.tokens.length > maxNewTokens) throw new AppError(ErrorCode.INTERNAL, `the completion source returned ${completion.tokens.length} tokens for a limit of ${maxNewTokens}`);
  if (completion.logprobs.length !== completion.tokens.length) throw new AppError(ErrorCode.INTERNAL, `the completion source returned ${completion.logprobs.length} log-probs for ${completion.tokens.length} tokens`);
}
