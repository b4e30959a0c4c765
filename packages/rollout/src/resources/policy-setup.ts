import { loadAgentPrompt, parseAgentPrompt, type AgentPrompt } from '@sqlenv/agents';
import type { ChatFormat, ModelConfig } from '@sqlenv/model';
import type { RunModelSpec } from '@sqlenv/protocol';
import { AppError, ErrorCode } from '@sqlenv/shared';

/** What the model policy needs from the model directory besides weights: config, chat format, prompt, limits. */
export interface PolicySetup {
  config: ModelConfig;
  chat: ChatFormat;
  prompt: AgentPrompt;
  /** Tokens an episode may use in all (the spec's context_tokens, capped by the model's). */
  contextTokens: number;
  /** The chat template's stop ids and the model's EOS ids. */
  stopIds: number[];
}

/**
 * Read the policy's setup from `modelDir`, refusing a directory whose
 * fingerprint differs from the spec's (another model, tokenizer or checkpoint).
 */
export async function loadPolicySetup(spec: RunModelSpec, modelDir: string): Promise<PolicySetup> {
  const model = await import('@sqlenv/model');
  const fingerprint = model.modelFingerprint(modelDir);
  if (fingerprint !== spec.fingerprint) {
    throw new AppError(ErrorCode.VALIDATION, `--model ${modelDir} is not the run's model: fingerprint ${fingerprint.slice(0, 19)}… differs from the spec's ${spec.fingerprint.slice(0, 19)}…`);
  }
  const config = model.readModelConfig(modelDir);
  const chat = await model.loadChatFormat(modelDir, { thinking: spec.thinking, config });
  const prompt = spec.prompt === null ? loadAgentPrompt() : parseAgentPrompt(spec.prompt, 'the run spec prompt');
  const contextTokens = Math.min(spec.context_tokens ?? config.maxPositionEmbeddings, config.maxPositionEmbeddings);
  return { config, chat, prompt, contextTokens, stopIds: [...new Set([...chat.stopIds, ...config.eosTokenIds])] };
}
