import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ByteTokenizer } from '../tokenizer/byte-tokenizer.ts';
import { modelInit } from './model-tasks.ts';
import { tokenizerFor } from '../io/model-dir.ts';
import { readModelConfig } from '../io/weights.ts';
import { modelTokenizer } from './tokenizer-task.ts';
import { TINY_BYTE_MODEL_CONFIG } from '../testing/tiny-model.ts';

const scratch = mkdtempSync(join(tmpdir(), 'tokenizer-task-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const episode = (city: string, n: number): string =>
  `<|im_start|>user\nHow many customers live in ${city}?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{"name": "query", "arguments": {"sql": "SELECT COUNT(*) FROM Customers WHERE City = '${city}'"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n${n}\n</tool_response><|im_end|>\n`;
const cities = ['Milan', 'Dublin', 'Lyon', 'Porto', 'Oslo', 'Graz'];

describe('sqlenv model tokenizer / init --tokenizer', () => {
  it('trains on text and input_ids lines and writes a tokenizer a model directory can use', async () => {
    const data = join(scratch, 'corpus.jsonl');
    const bytes = new ByteTokenizer();
    writeFileSync(
      data,
      cities.map((c, i) => JSON.stringify(i % 2 === 0 ? { text: episode(c, i) } : { input_ids: bytes.encode(episode(c, i)) })).join('\n') + '\n\n',
    );
    const out = join(scratch, 'tok');
    const result = modelTokenizer({ data, out, vocabSize: 320, decoder: bytes });
    expect(result.lines).toBe(cities.length);
    expect(result.meanTokens).toBeLessThan(result.meanBytes);
    expect(JSON.parse(readFileSync(join(out, 'tokenizer.json'), 'utf8'))).toMatchObject({ model: { type: 'BPE' } });

    const model = join(scratch, 'model');
    const init = await modelInit({ config: JSON.stringify({ ...tinyConfig, vocabSize: 320 }), out: model, tokenizer: out });
    expect(init.files).toContain('tokenizer.json');
    const tokenizer = await tokenizerFor(model, readModelConfig(model));
    expect(tokenizer.decode(tokenizer.encode(episode('Milan', 0)))).toBe(episode('Milan', 0));
    // A tokenizer bigger than the config's vocabulary is refused before anything is written.
    await expect(modelInit({ config: JSON.stringify({ ...tinyConfig, vocabSize: 272 }), out: join(scratch, 'small'), tokenizer: out })).rejects.toThrow(/do not fit/);
  });

  it('malformed corpora are clear errors naming the line', () => {
    const bad = join(scratch, 'bad.jsonl');
    writeFileSync(bad, '{"text": "ok"}\n{"ids": [1]}\n');
    expect(() => modelTokenizer({ data: bad, out: join(scratch, 'x'), vocabSize: 300 })).toThrow(/bad\.jsonl:2: expected/);
    writeFileSync(bad, '{"input_ids": [104, 105]}\n');
    expect(() => modelTokenizer({ data: bad, out: join(scratch, 'x'), vocabSize: 300 })).toThrow(/needs --model/);
    writeFileSync(bad, 'not json\n');
    expect(() => modelTokenizer({ data: bad, out: join(scratch, 'x'), vocabSize: 300 })).toThrow(/bad\.jsonl:1: not JSON/);
    expect(() => modelTokenizer({ data: join(scratch, 'missing.jsonl'), out: join(scratch, 'x'), vocabSize: 300 })).toThrow(/cannot read/);
  });
});

const tinyConfig = { ...TINY_BYTE_MODEL_CONFIG, maxPositionEmbeddings: 1024 };
