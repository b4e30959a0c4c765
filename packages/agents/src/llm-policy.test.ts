import { describe, expect, it } from 'vitest';
import { ByteTokenizer, ChatFormat } from '@sqlenv/model';
import { AppError, ErrorCode } from '@sqlenv/shared';
import { loadAgentPrompt } from './agent-prompt.ts';
import { ScriptedCompletionSource } from './completion-source.ts';
import { LlmPolicy, systemTurnIds } from './llm-policy.ts';

const prompt = loadAgentPrompt();
const chat = new ChatFormat(new ByteTokenizer(), { noThinkBlock: true });
const source = new ScriptedCompletionSource(() => [], { stopIds: chat.stopIds });

describe('LlmPolicy: the context must hold the system turn', () => {
  it('refuses at construction, with both numbers, a context smaller than the system prompt (max_position_embeddings 16)', () => {
    const systemTokens = systemTurnIds(chat, prompt).length;
    expect(systemTokens).toBeGreaterThan(16);
    let error: unknown;
    try {
      new LlmPolicy({ chat, prompt, source, maxNewTokens: 8, contextTokens: 16 });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe(ErrorCode.VALIDATION);
    expect((error as Error).message).toContain(`the system prompt (with its tool definitions) is ${systemTokens} tokens`);
    expect((error as Error).message).toContain('the context holds 16 tokens');
  });

  it('refuses the context that leaves no room for one token after the first prompt, and takes one token more', () => {
    const firstPromptTokens = systemTurnIds(chat, prompt).length + chat.generationPromptIds().length;
    expect(() => new LlmPolicy({ chat, prompt, source, maxNewTokens: 8, contextTokens: firstPromptTokens })).toThrow(/no episode could sample one token/);
    expect(() => new LlmPolicy({ chat, prompt, source, maxNewTokens: 8, contextTokens: firstPromptTokens + 1 })).not.toThrow();
  });
});
