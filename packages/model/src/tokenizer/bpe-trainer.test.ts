import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { byteLevelAlphabet, trainByteLevelBpe } from './bpe-trainer.ts';
import { BYTE_SPECIAL_IDS } from './byte-tokenizer.ts';
import { HfTokenizer } from './hf-tokenizer.ts';
import { CHAT_SPECIAL_TOKENS } from './tokenizer.ts';

const episode = (question: string, sql: string, answer: string): string =>
  '<|im_start|>system\nAnswer the question about a SQLite database.<|im_end|>\n' +
  `<|im_start|>user\n${question}<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{"name": "query", "arguments": {"sql": "${sql}"}}\n</tool_call><|im_end|>\n` +
  `<|im_start|>user\n<tool_response>\n${answer}\n</tool_response><|im_end|>\n`;
const corpus = [
  episode('How many customers live in Milan?', "SELECT COUNT(*) FROM Customers WHERE City = 'Milan'", '8'),
  episode('How many customers live in Zürich?', "SELECT COUNT(*) FROM Customers WHERE City = 'Zürich'", '3'),
  episode('Which students are enrolled in Algebra?', "SELECT s.name FROM students s JOIN enrollments e ON e.student_id = s.id WHERE e.course = 'Algebra'", 'Ann\nBob'),
  episode("What is O'Brien's email?", "SELECT Email FROM Customers WHERE LastName = 'O''Brien'", 'ob@mail.com'),
];
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

describe('byte-level BPE trainer', () => {
  it('GPT-2 byte alphabet: 256 distinct printable characters, printable ASCII kept', () => {
    const alphabet = byteLevelAlphabet();
    expect(new Set(alphabet).size).toBe(256);
    expect(alphabet['A'.charCodeAt(0)]).toBe('A');
    expect(alphabet[32]).toBe('Ġ'); // space
    expect(alphabet[10]).toBe('Ċ'); // newline
  });

  for (const splitWords of [true, false, 'isolated'] as const) {
    it(`learns merges that shorten the corpus and round-trips every text (splitWords ${splitWords})`, () => {
      const trained = trainByteLevelBpe(corpus, { vocabSize: 330, splitWords });
      expect(trained.merges).toBeGreaterThan(10);
      const tokenizer = new HfTokenizer(trained.tokenizerJson, trained.tokenizerConfig);
      expect(tokenizer.vocabSize).toBe(trained.vocabSize);
      for (const special of CHAT_SPECIAL_TOKENS) expect(tokenizer.tokenId(special)).toBe(BYTE_SPECIAL_IDS[special]);
      for (const text of [...corpus, 'unseen text: é日本 <tool_call>x</tool_call>']) {
        const ids = tokenizer.encode(text);
        expect(tokenizer.decode(ids)).toBe(text);
        if (corpus.includes(text)) expect(ids.length).toBeLessThan(new TextEncoder().encode(text).length * 0.8);
      }
      // Special tokens are single ids and never merged with neighbours.
      const ids = tokenizer.encode('a<|im_end|>\nb');
      expect(ids).toContain(BYTE_SPECIAL_IDS['<|im_end|>']);
    });
  }

  it("splitWords 'isolated': a name is the same ids in the question, in a quoted SQL literal, a result row and a JSON string", () => {
    const names = ['Milan', 'Zürich', 'Algebra', 'Brien'];
    const contexts = (name: string): string[] => [`live in ${name}?`, `City = '${name}'`, `\n${name} | 3`, `"value": "${name}"`];
    const idsIn = (tokenizer: HfTokenizer, context: string, name: string): number[] => {
      // The name's ids are those of the context minus those of its prefix (the split makes the name its own pre-token).
      const at = context.indexOf(name);
      const before = tokenizer.encode(context.slice(0, at));
      const through = tokenizer.encode(context.slice(0, at + name.length));
      expect(through.slice(0, before.length)).toEqual(before);
      return through.slice(before.length);
    };
    const isolated = trainByteLevelBpe(corpus, { vocabSize: 340, splitWords: 'isolated' });
    const tokenizer = new HfTokenizer(isolated.tokenizerJson, isolated.tokenizerConfig);
    for (const name of names) {
      const seen = contexts(name).map((c) => idsIn(tokenizer, c, name));
      for (const ids of seen) expect(ids).toEqual(tokenizer.encode(name));
    }
  });

  it('the same corpus always gives the same tokenizer; bad options are a clear error', () => {
    expect(JSON.stringify(trainByteLevelBpe(corpus, { vocabSize: 300 }).tokenizerJson)).toBe(JSON.stringify(trainByteLevelBpe(corpus, { vocabSize: 300 }).tokenizerJson));
    expect(() => trainByteLevelBpe(corpus, { vocabSize: 10 })).toThrow(/vocabSize/);
  });

  const python = process.env['SQLENV_PYTHON'] ?? 'python3';
  const hasTokenizers = spawnSync(python, ['-c', 'import tokenizers'], { encoding: 'utf8' }).status === 0;
  it.skipIf(!hasTokenizers).each([true, false, 'isolated'] as const)('Python tokenizers loads the file and gives the same ids (splitWords %s)', (splitWords) => {
    const dir = mkdtempSync(join(tmpdir(), 'bpe-'));
    dirs.push(dir);
    const trained = trainByteLevelBpe(corpus, { vocabSize: 340, splitWords });
    writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(trained.tokenizerJson));
    const texts = [...corpus, 'unseen: é 日本 <|im_start|>x'];
    writeFileSync(join(dir, 'texts.json'), JSON.stringify(texts));
    const script = [
      'import json, sys',
      'from tokenizers import Tokenizer',
      `t = Tokenizer.from_file(${JSON.stringify(join(dir, 'tokenizer.json'))})`,
      `texts = json.load(open(${JSON.stringify(join(dir, 'texts.json'))}))`,
      'print(json.dumps([t.encode(x, add_special_tokens=False).ids for x in texts]))',
    ].join('\n');
    const run = spawnSync(python, ['-c', script], { encoding: 'utf8' });
    expect(run.stderr).toBe('');
    const tokenizer = new HfTokenizer(trained.tokenizerJson, trained.tokenizerConfig);
    expect(JSON.parse(run.stdout)).toEqual(texts.map((t) => tokenizer.encode(t)));
  });
  if (!hasTokenizers) it.skip(`Python reference check skipped: ${python} cannot import tokenizers (set SQLENV_PYTHON)`, () => undefined);
});
