import { AppError, ErrorCode } from '@sqlenv/shared';
import { CHAT_SPECIAL_TOKENS, type ChatSpecialToken, type TextTokenizer } from './tokenizer.ts';

/**
 * Byte-level tokenizer for tiny from-scratch models: ids 0..255 are the UTF-8
 * bytes, then the Qwen chat special tokens, so the same chat template and stop
 * tokens work for tiny and real models. Vocab padded to a multiple of 16.
 */
const FIRST_SPECIAL_ID = 256;
export const BYTE_SPECIAL_IDS = Object.fromEntries(
  CHAT_SPECIAL_TOKENS.map((token, i) => [token, FIRST_SPECIAL_ID + i]),
) as Record<ChatSpecialToken, number>;
export const BYTE_TOKENIZER_VOCAB_SIZE = Math.ceil((FIRST_SPECIAL_ID + CHAT_SPECIAL_TOKENS.length) / 16) * 16; // 272

const SPECIAL_BY_ID = new Map<number, string>(CHAT_SPECIAL_TOKENS.map((t) => [BYTE_SPECIAL_IDS[t], t]));
// Longest-first alternation so `</tool_call>` never matches as `<` + text.
const SPECIAL_PATTERN = new RegExp(
  [...CHAT_SPECIAL_TOKENS]
    .sort((a, b) => b.length - a.length)
    .map((t) => t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('|'),
  'g',
);

export class ByteTokenizer implements TextTokenizer {
  readonly vocabSize = BYTE_TOKENIZER_VOCAB_SIZE;
  readonly #encoder = new TextEncoder();
  readonly #decoder = new TextDecoder('utf-8', { fatal: false });

  encode(text: string): number[] {
    const ids: number[] = [];
    let last = 0;
    for (const match of text.matchAll(SPECIAL_PATTERN)) {
      for (const byte of this.#encoder.encode(text.slice(last, match.index))) ids.push(byte);
      ids.push(BYTE_SPECIAL_IDS[match[0] as ChatSpecialToken]);
      last = match.index + match[0].length;
    }
    for (const byte of this.#encoder.encode(text.slice(last))) ids.push(byte);
    return ids;
  }

  decode(ids: readonly number[], options: { skipSpecialTokens?: boolean } = {}): string {
    let text = '';
    let bytes: number[] = [];
    const flush = (): void => {
      if (bytes.length > 0) text += this.#decoder.decode(Uint8Array.from(bytes));
      bytes = [];
    };
    for (const id of ids) {
      if (id < FIRST_SPECIAL_ID) {
        bytes.push(id);
        continue;
      }
      flush();
      const special = SPECIAL_BY_ID.get(id);
      if (special === undefined) {
        if (id >= this.vocabSize) throw new AppError(ErrorCode.MODEL, `token id ${id} is outside the byte vocabulary (${this.vocabSize})`);
        continue; // padding ids decode to nothing
      }
      if (options.skipSpecialTokens !== true) text += special;
    }
    flush();
    return text;
  }

  tokenId(token: string): number | undefined {
    if (Object.hasOwn(BYTE_SPECIAL_IDS, token)) return BYTE_SPECIAL_IDS[token as ChatSpecialToken];
    const bytes = this.#encoder.encode(token);
    return bytes.length === 1 ? bytes[0] : undefined;
  }
}
