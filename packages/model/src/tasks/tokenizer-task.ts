import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { AppError, ErrorCode } from '@sqlenv/shared';
import { trainByteLevelBpe, type TrainedBpe } from '../tokenizer/bpe-trainer.ts';
import { HfTokenizer } from '../tokenizer/hf-tokenizer.ts';
import type { TextTokenizer } from '../tokenizer/tokenizer.ts';

/**
 * `sqlenv model tokenizer --data F.jsonl [--model DIR] --vocab-size N [--split-words true|false|isolated] --out DIR`:
 * train a byte-level BPE tokenizer on a corpus and write `tokenizer.json` + `tokenizer_config.json`.
 * Corpus lines are `{"text": "..."}`, or `{"input_ids": [...]}` decoded with `--model`'s tokenizer
 * (e.g. `sqlenv sft-data` output of a byte-tokenizer model: its ids decode to the exact text).
 */
export interface ModelTokenizerArgs {
  data: string;
  out: string;
  vocabSize: number;
  splitWords?: boolean | 'isolated';
  /** Tokenizer that decodes `input_ids` lines. */
  decoder?: TextTokenizer;
}

export interface ModelTokenizerResult extends Omit<TrainedBpe, 'tokenizerJson' | 'tokenizerConfig'> {
  files: string[];
  lines: number;
  /** Mean tokens per corpus line, before (bytes) and after. */
  meanBytes: number;
  meanTokens: number;
  summary: string;
}

export function modelTokenizer(args: ModelTokenizerArgs): ModelTokenizerResult {
  const texts = readCorpus(args.data, args.decoder);
  const trained = trainByteLevelBpe(texts, { vocabSize: args.vocabSize, ...(args.splitWords === undefined ? {} : { splitWords: args.splitWords }) });
  mkdirSync(args.out, { recursive: true });
  writeFileSync(join(args.out, 'tokenizer.json'), `${JSON.stringify(trained.tokenizerJson)}\n`);
  writeFileSync(join(args.out, 'tokenizer_config.json'), `${JSON.stringify(trained.tokenizerConfig, null, 2)}\n`);
  const tokenizer = new HfTokenizer(trained.tokenizerJson, trained.tokenizerConfig);
  const encoder = new TextEncoder();
  const meanBytes = texts.reduce((n, t) => n + encoder.encode(t).length, 0) / texts.length;
  const meanTokens = texts.reduce((n, t) => n + tokenizer.encode(t).length, 0) / texts.length;
  return {
    vocabSize: trained.vocabSize,
    merges: trained.merges,
    files: ['tokenizer.json', 'tokenizer_config.json'],
    lines: texts.length,
    meanBytes,
    meanTokens,
    summary: `wrote a ${trained.vocabSize}-token BPE tokenizer (${trained.merges} merges) to ${args.out}: ${texts.length} texts, ${meanBytes.toFixed(0)} bytes → ${meanTokens.toFixed(0)} tokens each on average`,
  };
}

function readCorpus(path: string, decoder: TextTokenizer | undefined): string[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (cause) {
    throw new AppError(ErrorCode.NOT_FOUND, `cannot read ${path}`, { cause });
  }
  const texts: string[] = [];
  text.split('\n').forEach((line, index) => {
    if (line.trim() === '') return;
    const where = `${path}:${index + 1}`;
    let json: unknown;
    try {
      json = JSON.parse(line);
    } catch (cause) {
      throw new AppError(ErrorCode.VALIDATION, `${where}: not JSON`, { cause });
    }
    const record = (typeof json === 'object' && json !== null ? json : {}) as { text?: unknown; input_ids?: unknown };
    if (typeof record.text === 'string') {
      texts.push(record.text);
    } else if (Array.isArray(record.input_ids) && record.input_ids.every((id) => Number.isInteger(id) && (id as number) >= 0)) {
      if (decoder === undefined) throw new AppError(ErrorCode.VALIDATION, `${where}: an input_ids line needs --model to decode it`);
      texts.push(decoder.decode(record.input_ids as number[]));
    } else {
      throw new AppError(ErrorCode.VALIDATION, `${where}: expected {"text": string} or {"input_ids": [non-negative integers]}`);
    }
  });
  if (texts.length === 0) throw new AppError(ErrorCode.VALIDATION, `${path}: no corpus lines`);
  return texts;
}
