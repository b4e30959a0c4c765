import { AppError, ErrorCode } from '@sqlenv/shared';
import type { SqlAction } from '@sqlenv/protocol';
import type { ChatFormat, ToolCall } from '@sqlenv/model';
import type { AgentPrompt } from './agent-prompt.ts';
import type { CompletionSource, EpisodeCompleter } from './completion-source.ts';
import { isPolicyStop, type EpisodeContext, type Policy } from './policy.ts';

/**
 * An action written the way the LLM agent is asked to write it: one Qwen tool
 * call (`<tool_call>\n{"name": "query", "arguments": {"sql": "..."}}\n</tool_call>`),
 * then `<|im_end|>`. The one rendering shared by the agent's SFT data and
 * anything else that turns actions into model text; `parseToolCall` reads it
 * back to the same action (tested).
 */
export function actionToolCall(action: SqlAction, prompt: AgentPrompt): ToolCall {
  const tool = prompt.tools.find((t) => t.actionType === action.action_type);
  if (tool === undefined) throw new AppError(ErrorCode.VALIDATION, `no tool for action ${action.action_type} in ${prompt.source}`);
  return { name: tool.name, arguments: { [tool.parameter]: action.argument } };
}

/** The completion text of an action (without the closing `<|im_end|>`). */
export function actionCompletionText(action: SqlAction, prompt: AgentPrompt, chat: ChatFormat): string {
  return chat.toolCallText(actionToolCall(action, prompt));
}

/** The completion ids of an action: its text encoded, then `<|im_end|>` (what a model that wrote it would have sampled). */
export function actionCompletionIds(action: SqlAction, prompt: AgentPrompt, chat: ChatFormat): number[] {
  return [...chat.tokenizer.encode(actionCompletionText(action, prompt, chat)), chat.imEndId];
}

/**
 * Completions from a text policy (the oracle for SFT data): each turn asks the
 * policy for its action on the turn's observation and "samples" that action's
 * tool-call ids. Log-probs are 0 (nothing was sampled).
 */
export class PolicyCompletionSource implements CompletionSource {
  readonly #policy: Policy;
  readonly #prompt: AgentPrompt;
  readonly #chat: ChatFormat;

  constructor(policy: Policy, prompt: AgentPrompt, chat: ChatFormat) {
    this.#policy = policy;
    this.#prompt = prompt;
    this.#chat = chat;
  }

  episode(context: EpisodeContext): EpisodeCompleter {
    const actor = this.#policy.begin(context);
    return {
      complete: async (request) => {
        const move = await actor.act(request.observation);
        if (isPolicyStop(move)) throw new AppError(ErrorCode.INTERNAL, `policy ${this.#policy.name} stopped: ${move.detail}`);
        const ids = actionCompletionIds(move, this.#prompt, this.#chat);
        // Over the turn's limit, the call is cut like a model's reply would be (then a parse error).
        const tokens = ids.slice(0, request.maxNewTokens);
        return { tokens, logprobs: tokens.map(() => 0), finishReason: tokens.length < ids.length ? 'length' : 'stop', policyVersion: 0 };
      },
    };
  }
}
