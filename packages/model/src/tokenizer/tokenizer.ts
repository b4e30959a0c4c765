/**
 * What the model package needs from a tokenizer. Special-token strings that
 * appear in `text` are encoded as their single ids, as Hugging Face tokenizers
 * do with `split_special_tokens: false`; the chat template relies on it.
 */
export interface TextTokenizer {
  /** Number of ids the tokenizer can produce (≤ the model's vocabSize). */
  readonly vocabSize: number;
  /** Text → ids (no BOS/EOS added). */
  encode(text: string): number[];
  /** Ids → text. */
  decode(ids: readonly number[], options?: { skipSpecialTokens?: boolean }): string;
  /** The id of a (special) token string, or undefined when it is not in the vocabulary. */
  tokenId(token: string): number | undefined;
}

/** The special tokens of the Qwen chat format (docs/architecture.md, "Models and the runtime"). */
export const CHAT_SPECIAL_TOKENS = [
  '<|endoftext|>',
  '<|im_start|>',
  '<|im_end|>',
  '<tool_call>',
  '</tool_call>',
  '<tool_response>',
  '</tool_response>',
  '<think>',
  '</think>',
] as const;
export type ChatSpecialToken = (typeof CHAT_SPECIAL_TOKENS)[number];
