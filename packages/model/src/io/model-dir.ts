import { createHash } from 'node:crypto';
import { closeSync, existsSync, openSync, readdirSync, readFileSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { AppError, ErrorCode } from '@sqlenv/shared';
import { ChatFormat } from '../tokenizer/chat-template.ts';
import { ByteTokenizer, BYTE_TOKENIZER_VOCAB_SIZE } from '../tokenizer/byte-tokenizer.ts';
import { loadBundledQwenTokenizer, loadHfTokenizer } from '../tokenizer/hf-tokenizer.ts';
import type { TextTokenizer } from '../tokenizer/tokenizer.ts';
import type { ModelConfig } from './config.ts';
import { readModelConfig } from './weights.ts';

/**
 * What a process needs to know about a model directory beyond its weights:
 * a fingerprint (so every worker of a run checks it loads the same model) and
 * the chat format its tokenizer and template call for.
 */

/** Bytes of tensor data hashed at the start of each safetensors file (a cheap check of the values). */
const DATA_SAMPLE_BYTES = 64 * 1024;

/**
 * A fingerprint of a model directory: sha256 over config.json, tokenizer.json,
 * tokenizer_config.json, and for every `*.safetensors` file its name, size,
 * header (tensor names, dtypes, shapes, offsets) and first 64 KiB of data. It
 * tells apart another architecture, tokenizer, checkpoint layout or
 * initialisation in milliseconds; it is not a full hash of the weights (that
 * would read gigabytes at every worker start).
 */
export function modelFingerprint(dir: string): string {
  const hash = createHash('sha256');
  const configPath = join(dir, 'config.json');
  if (!existsSync(configPath)) throw new AppError(ErrorCode.MODEL, `no config.json in ${dir}`);
  for (const name of ['config.json', 'tokenizer.json', 'tokenizer_config.json']) {
    const path = join(dir, name);
    hash.update(`${name}\0`);
    if (existsSync(path)) hash.update(readFileSync(path));
    hash.update('\0');
  }
  const shards = readdirSync(dir)
    .filter((f) => f.endsWith('.safetensors'))
    .sort();
  if (shards.length === 0) throw new AppError(ErrorCode.MODEL, `no .safetensors file in ${dir}`);
  for (const name of shards) {
    const path = join(dir, name);
    const size = statSync(path).size;
    hash.update(`${name}\0${size}\0`);
    const fd = openSync(path, 'r');
    try {
      const lengthBytes = Buffer.alloc(8);
      readSync(fd, lengthBytes, 0, 8, 0);
      const headerLength = Number(lengthBytes.readBigUInt64LE(0));
      if (headerLength > size - 8) throw new AppError(ErrorCode.MODEL, `${path}: header length ${headerLength} exceeds the file`);
      const sample = Buffer.alloc(Math.min(headerLength + DATA_SAMPLE_BYTES, size - 8));
      readSync(fd, sample, 0, sample.length, 8);
      hash.update(sample);
    } finally {
      closeSync(fd);
    }
  }
  return `sha256:${hash.digest('hex')}`;
}

/**
 * Whether the directory's chat template is Qwen3's, whose generation prompt
 * carries a think block (`<think>\n\n</think>\n\n` with thinking off). Qwen2.5
 * templates have none; a directory without a template (tiny byte-level
 * models) gets none either, which saves those tokens on every turn.
 */
export function hasThinkTemplate(dir: string): boolean {
  const path = join(dir, 'tokenizer_config.json');
  if (!existsSync(path)) return false;
  try {
    const json = JSON.parse(readFileSync(path, 'utf8')) as { chat_template?: unknown };
    const template = json.chat_template;
    const text = typeof template === 'string' ? template : JSON.stringify(template ?? '');
    return text.includes('<think>');
  } catch (cause) {
    throw new AppError(ErrorCode.MODEL, `${path} is not valid JSON`, { cause });
  }
}

/** The tokenizer and chat format of a model directory (`tokenizerFor` picks the tokenizer). */
export async function loadChatFormat(dir: string, options: { thinking?: boolean; config?: ModelConfig } = {}): Promise<ChatFormat> {
  const config = options.config ?? readModelConfig(dir);
  const tokenizer = await tokenizerFor(dir, config);
  const think = hasThinkTemplate(dir);
  return new ChatFormat(tokenizer, { enableThinking: options.thinking ?? false, noThinkBlock: !think });
}

/** Real Qwen vocabulary size of tokenizer.json (the embedding is padded to 151,936 rows). */
export const QWEN_TOKENIZER_VOCAB = 151_669;

/** The tokenizer for a model directory (tokenizer.json, else the byte tokenizer for vocab 272, else the bundled Qwen tokenizer for Qwen-vocabulary models). */
export async function tokenizerFor(dir: string, config: ModelConfig): Promise<TextTokenizer> {
  if (existsSync(join(dir, 'tokenizer.json'))) return loadHfTokenizer(dir, { vocabSize: config.vocabSize });
  if (config.vocabSize === BYTE_TOKENIZER_VOCAB_SIZE) return new ByteTokenizer();
  if (config.vocabSize >= QWEN_TOKENIZER_VOCAB && config.architecture !== 'llama') return loadBundledQwenTokenizer();
  throw new AppError(ErrorCode.MODEL, `no tokenizer.json in ${dir}, and vocab size ${config.vocabSize} matches no built-in tokenizer`);
}
