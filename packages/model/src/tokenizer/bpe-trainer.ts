import { z } from 'zod';
import { AppError, ErrorCode, formatZodIssues } from '@sqlenv/shared';
import { CHAT_SPECIAL_TOKENS } from './tokenizer.ts';

/**
 * Trains a byte-level BPE tokenizer (Sennrich et al. 2016, https://arxiv.org/abs/1508.07909;
 * byte-level variant of GPT-2, Radford et al. 2019) on a corpus and writes it as a Hugging Face
 * `tokenizer.json`, so it loads in `HfTokenizer` here and in Python's `tokenizers` /
 * `transformers` unchanged.
 *
 * What it is for: a from-scratch demo model trained on 2 CPU cores pays for every token, and a
 * byte-level vocabulary makes an agent episode (system prompt with tool schemas, SQL, results)
 * about 1,700 tokens long. A few hundred merges learned on the project's own episodes cut that
 * several-fold. Real checkpoints keep their own tokenizer.json.
 *
 * Layout of the ids: 0–255 are the bytes (as in the byte tokenizer), 256–264 the Qwen chat
 * special tokens in `CHAT_SPECIAL_TOKENS` order (also as in the byte tokenizer), then the merges
 * in the order they were learned. Special tokens split the text before anything else and are
 * never merged with their neighbours, as in Hugging Face tokenizers.
 */
export const BpeTrainerOptionsSchema = z.strictObject({
  /** Total vocabulary size: 256 bytes + the special tokens + merges. */
  vocabSize: z.number().int().min(CHAT_SPECIAL_TOKENS.length + 256).max(65_536).default(1024),
  /**
   * Split text into GPT-2 pre-tokens (words, numbers, punctuation runs, spaces) before merging, as
   * Hugging Face's ByteLevel pre-tokenizer does by default. false merges across word boundaries
   * (whole phrases of a repeated prompt become single tokens). 'isolated': letters, digits,
   * punctuation and whitespace runs each apart — GPT-2 glues a space to the word after it, so
   * " Ethan" in a question and "'Ethan'" in SQL are different tokens; here a word is the same
   * tokens wherever it stands, and copying it is a pure look-up. Default true.
   */
  splitWords: z.union([z.boolean(), z.literal('isolated')]).default(true),
  /** Longest token in characters of the byte-level alphabet (≈ bytes). Default 16. */
  maxTokenChars: z.number().int().min(2).max(256).default(16),
  /** A pair must occur at least this often (weighted by repeats) to be merged. Default 2. */
  minFrequency: z.number().int().min(1).default(2),
});
export type BpeTrainerOptions = z.input<typeof BpeTrainerOptionsSchema>;

/** GPT-2's pre-tokenizer pattern, as Hugging Face's ByteLevel uses it (linear: no nested quantifiers). */
const WORD_PATTERN = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;
/** splitWords 'isolated': runs of letters, of digits, of other symbols, of whitespace; nothing glued. */
const ISOLATED_SOURCE = String.raw`\p{L}+|\p{N}+|[^\s\p{L}\p{N}]+|\s+`;
const ISOLATED_PATTERN = new RegExp(ISOLATED_SOURCE, 'gu');

/**
 * GPT-2's reversible byte → printable character map (`bytes_to_unicode`): printable Latin-1
 * bytes map to themselves, the rest to code points from 256 on, so every byte string is a
 * string without spaces or control characters.
 */
export function byteLevelAlphabet(): string[] {
  const printable = (b: number): boolean => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  const chars: string[] = [];
  let next = 256;
  for (let b = 0; b < 256; b++) chars.push(String.fromCodePoint(printable(b) ? b : next++));
  return chars;
}

/** Split on the special tokens; only the text between them is learned from. */
function textSegments(text: string): string[] {
  const segments: string[] = [];
  let rest = [text];
  for (const special of CHAT_SPECIAL_TOKENS) rest = rest.flatMap((s) => s.split(special));
  for (const s of rest) if (s.length > 0) segments.push(s);
  return segments;
}

export interface TrainedBpe {
  /** The Hugging Face tokenizer.json object. */
  tokenizerJson: Record<string, unknown>;
  /** tokenizer_config.json with the chat special tokens (eos = `<|im_end|>`, pad = `<|endoftext|>`). */
  tokenizerConfig: Record<string, unknown>;
  vocabSize: number;
  merges: number;
}

/**
 * Learn merges from `texts`. Each distinct pre-token is kept once with its count, and pair
 * counts are recomputed over the distinct words at every merge: O(merges × distinct symbols),
 * about a second for a vocabulary of 1,024 over a few hundred agent episodes.
 */
export function trainByteLevelBpe(texts: Iterable<string>, input: BpeTrainerOptions = {}): TrainedBpe {
  const parsed = BpeTrainerOptionsSchema.safeParse(input);
  if (!parsed.success) throw new AppError(ErrorCode.VALIDATION, `invalid BPE trainer options: ${formatZodIssues(parsed.error)}`);
  const options = parsed.data;
  const alphabet = byteLevelAlphabet();
  const encoder = new TextEncoder();

  // Distinct words as arrays of token ids, with how often each occurs.
  const counts = new Map<string, number>();
  for (const text of texts) {
    for (const segment of textSegments(text)) {
      const words = options.splitWords === false ? [segment] : (segment.match(options.splitWords === 'isolated' ? ISOLATED_PATTERN : WORD_PATTERN) ?? []);
      for (const w of words) counts.set(w, (counts.get(w) ?? 0) + 1);
    }
  }
  const words: { ids: number[]; count: number }[] = [...counts].map(([w, count]) => ({ ids: [...encoder.encode(w)], count }));

  const tokenText: string[] = [...alphabet, ...CHAT_SPECIAL_TOKENS];
  const merges: [string, string][] = [];
  while (tokenText.length < options.vocabSize) {
    const pairCounts = new Map<number, number>();
    for (const { ids, count } of words) {
      for (let i = 0; i + 1 < ids.length; i++) {
        const key = (ids[i] as number) * 65_536 + (ids[i + 1] as number);
        pairCounts.set(key, (pairCounts.get(key) ?? 0) + count);
      }
    }
    let best = -1;
    let bestCount = 0;
    for (const [key, count] of pairCounts) {
      const left = Math.floor(key / 65_536);
      const right = key % 65_536;
      if ((tokenText[left] as string).length + (tokenText[right] as string).length > options.maxTokenChars) continue;
      // Ties go to the smaller pair key so that a corpus always gives the same tokenizer.
      if (count > bestCount || (count === bestCount && key < best)) {
        best = key;
        bestCount = count;
      }
    }
    if (best < 0 || bestCount < options.minFrequency) break;
    const left = Math.floor(best / 65_536);
    const right = best % 65_536;
    const merged = tokenText.length;
    tokenText.push((tokenText[left] as string) + (tokenText[right] as string));
    merges.push([tokenText[left] as string, tokenText[right] as string]);
    for (const word of words) word.ids = mergePair(word.ids, left, right, merged);
  }
  return { tokenizerJson: tokenizerJson(tokenText, merges, options.splitWords), tokenizerConfig: tokenizerConfig(), vocabSize: tokenText.length, merges: merges.length };
}

/** Replace every non-overlapping (left, right) pair, left to right. */
function mergePair(ids: number[], left: number, right: number, merged: number): number[] {
  if (ids.length < 2) return ids;
  const out: number[] = [];
  for (let i = 0; i < ids.length; i++) {
    if (ids[i] === left && ids[i + 1] === right) {
      out.push(merged);
      i++;
    } else {
      out.push(ids[i] as number);
    }
  }
  return out;
}

function tokenizerJson(tokenText: readonly string[], merges: readonly [string, string][], splitWords: boolean | 'isolated'): Record<string, unknown> {
  // The special tokens are in the model's vocabulary too (as GPT-2's <|endoftext|> is): Python's
  // tokenizers gives an added token that is missing from the vocabulary the next free id instead of
  // its declared one, which would move them after the merges.
  const vocab: Record<string, number> = {};
  tokenText.forEach((text, id) => {
    vocab[text] = id;
  });
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: CHAT_SPECIAL_TOKENS.map((content) => ({
      id: tokenText.indexOf(content),
      content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    })),
    normalizer: null,
    pre_tokenizer:
      splitWords === 'isolated'
        ? {
            // Qwen2's own tokenizer.json has this shape: a regex Split, then ByteLevel without its regex.
            type: 'Sequence',
            pretokenizers: [
              { type: 'Split', pattern: { Regex: ISOLATED_SOURCE }, behavior: 'Isolated', invert: false },
              { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false },
            ],
          }
        : { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: splitWords },
    post_processor: null,
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      merges: merges.map(([a, b]) => [a, b]),
    },
  };
}

function tokenizerConfig(): Record<string, unknown> {
  return {
    tokenizer_class: 'PreTrainedTokenizerFast',
    eos_token: '<|im_end|>',
    pad_token: '<|endoftext|>',
    bos_token: null,
    unk_token: null,
    model_max_length: 32_768,
    clean_up_tokenization_spaces: false,
    split_special_tokens: false,
  };
}
