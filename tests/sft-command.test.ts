import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readSftExamples } from '@sqlenv/grpo';
import { loadAdapterDir, loadChatFormat, loadModel, readModelConfig } from '@sqlenv/model';
import { TINY_BYTE_MODEL_CONFIG } from '@sqlenv/model/testing';

/**
 * `sqlenv sft` as a user runs it (the real bin, a child process): on the oracle episodes
 * `sqlenv sft-data` writes, as a warm start whose adapter every model command takes (`--adapter`).
 */
const bin = fileURLToPath(new URL('../apps/cli/bin/sqlenv.js', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'sft-command-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

function sqlenv(args: string[]): Promise<Result> {
  return new Promise((resolve) => {
    execFile(process.execPath, [bin, ...args], { env: { ...process.env, SQLENV_CACHE_DIR: join(root, 'cache') }, timeout: 240_000, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout, stderr });
    });
  });
}

async function ok(args: string[]): Promise<string> {
  const result = await sqlenv(args);
  expect(result.code, `sqlenv ${args.join(' ')}: ${result.stderr}`).toBe(0);
  return result.stdout;
}

const tiny = join(root, 'tiny'); // byte tokenizer
const qwenVocab = join(root, 'qwen-vocab'); // the Qwen tokenizer (BPE), a tiny decoder
beforeAll(async () => {
  await ok(['model', 'init', '--config', 'tiny-qwen3', '--out', tiny, '--seed', '3']);
  const config = { ...TINY_BYTE_MODEL_CONFIG, vocabSize: 151_936, maxPositionEmbeddings: 4096, eosTokenIds: [151_645, 151_643], padTokenId: 151_643 };
  await ok(['model', 'init', '--config', JSON.stringify(config), '--out', qwenVocab, '--seed', '1']);
}, 120_000);

describe('sqlenv sft', () => {
  it.each([
    ['the byte tokenizer', tiny, 'train'],
    ['the Qwen tokenizer', qwenVocab, 'dev'],
  ])('messages lines (sft-data --format messages) render to exactly the ids and loss mask of the ids lines (%s)', async (_, model, split) => {
    const ids = join(root, `${split}-ids.jsonl`);
    const messages = join(root, `${split}-messages.jsonl`);
    await ok(['sft-data', '--model', model, '--out', ids, '--split', split, '--episodes', '6']);
    await ok(['sft-data', '--model', model, '--out', messages, '--split', split, '--episodes', '6', '--format', 'messages']);
    const config = readModelConfig(model);
    const loadChat = (): ReturnType<typeof loadChatFormat> => loadChatFormat(model, { config });
    const fromIds = await readSftExamples(readFileSync(ids, 'utf8'), { config, loadChat });
    const fromMessages = await readSftExamples(readFileSync(messages, 'utf8'), { config, loadChat });
    expect(fromIds.length).toBeGreaterThan(0);
    expect(fromMessages).toEqual(fromIds);
  }, 120_000);

  it('trains on sft-data output; --adapter-init continues exactly; the adapter serves model logits, eval and train --policy model', async () => {
    const data = join(root, 'warm.jsonl');
    const written = await ok(['sft-data', '--model', tiny, '--out', data, '--split', 'train', '--episodes', '6', '--format', 'messages']);
    const lines = Number(/^wrote (\d+)/.exec(written)?.[1]);
    expect(lines).toBeGreaterThan(0);
    // One line per step, in file order: step n + 1 sees line 0 again, after n steps of training.
    const train = ['sft', '--model', tiny, '--data', data, '--batch-size', '1', '--lr', '0.01', '--lora-rank', '4', '--lora-alpha', '8', '--lora-targets', 'q_proj,v_proj,down_proj'];
    const steps = (stdout: string): Array<{ step: number; loss: number; lr: number; lines: number[] }> =>
      stdout.trim().split('\n').map((l) => JSON.parse(l) as { step: number; loss: number; lr: number; lines: number[] }).filter((r) => r.step !== undefined);
    const warm = join(root, 'warm-adapter');
    const first = await ok([...train, '--steps', String(lines), '--out', warm]);
    const summary = JSON.parse(first.trim().split('\n').at(-1) ?? '{}') as Record<string, unknown>;
    expect(summary).toMatchObject({ done: true, steps: lines, examples: lines, out: warm, lora: { r: 4, lora_alpha: 8, target_modules: ['q_proj', 'v_proj', 'down_proj'] } });
    expect(steps(first)[0]).toMatchObject({ step: 1, lr: 0.01, lines: [0] });
    expect(loadAdapterDir(warm, readModelConfig(tiny)).lora).toEqual({ rank: 4, alpha: 8, targets: ['q_proj', 'v_proj', 'down_proj'] });

    // The uninterrupted run's step n + 1 sees the adapter after step n; the first step from --adapter-init does too.
    const longer = steps(await ok([...train, '--steps', String(lines + 1), '--out', join(root, 'longer')]));
    expect(longer.slice(0, lines).map((s) => s.loss)).toEqual(steps(first).map((s) => s.loss));
    expect(longer[lines]!.lines).toEqual([0]);
    expect(longer[lines]!.loss).toBeLessThan(longer[0]!.loss); // line 0 after training on it
    const resumed = steps(await ok(['sft', '--model', tiny, '--data', data, '--batch-size', '1', '--adapter-init', warm, '--steps', '1', '--out', join(root, 'resumed')]));
    expect(Math.abs(resumed[0]!.loss - longer[lines]!.loss) / longer[lines]!.loss).toBeLessThan(1e-6);
    const clash = await sqlenv(['sft', '--model', tiny, '--data', data, '--adapter-init', warm, '--lora-rank', '8', '--steps', '1', '--out', join(root, 'x')]);
    expect(clash.code).toBe(2);
    expect(clash.stderr).toContain("--lora-rank 8 (the adapter's r is 4)");

    const logits = (adapter: string[]): Promise<number[]> => ok(['model', 'logits', '--model', tiny, '--tokens', '256,72,105', '--json', ...adapter]).then((out) => JSON.parse(out) as number[]);
    const [base, adapted] = await Promise.all([logits([]), logits(['--adapter', warm])]);
    expect(adapted).toHaveLength(base.length);
    expect(adapted).not.toEqual(base);

    const evaluated = JSON.parse((await ok(['eval', '--policy', 'model', '--model', tiny, '--adapter', warm, '--episodes', '1', '--max-new-tokens', '8', '--json'])).trim().split('\n').at(-1) ?? '{}') as Record<string, unknown>;
    expect(evaluated).toMatchObject({ policy: 'model', episodes: 1, errors: 0 });
    // GRPO from the warm start: the run's LoRA shape comes from the adapter (r = 4 here, not the default 8).
    const trained = JSON.parse((await ok(['train', '--policy', 'model', '--model', tiny, '--adapter', warm, '--episodes', '2', '--group-size', '2', '--groups-per-batch', '1', '--max-new-tokens', '4', '--json'])).trim().split('\n').at(-1) ?? '{}') as Record<string, unknown>;
    expect(trained).toMatchObject({ policy: 'model', episodes_completed: 2, episodes_failed: 0 });
  }, 300_000);

  it('--full trains every base weight and writes a model directory that plays as a model', async () => {
    const data = join(root, 'full.jsonl');
    await ok(['sft-data', '--model', tiny, '--out', data, '--split', 'train', '--episodes', '4']);
    const out = join(root, 'full-model');
    const stdout = await ok(['sft', '--model', tiny, '--data', data, '--full', '--steps', '3', '--batch-size', '2', '--lr', '0.003', '--out', out]);
    const summary = JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as { files: string[] };
    expect(summary.files).toEqual(['config.json', 'model.safetensors']);
    const before = loadModel(tiny).weights;
    const after = loadModel(out).weights;
    expect([...after.keys()].sort()).toEqual([...before.keys()].sort());
    for (const [name, t] of after) expect(t.data.some((v, i) => v !== before.get(name)!.data[i]), name).toBe(true);
    expect(readModelConfig(out)).toEqual(readModelConfig(tiny));
    const evaluated = JSON.parse((await ok(['eval', '--policy', 'model', '--model', out, '--episodes', '1', '--max-new-tokens', '8', '--json'])).trim().split('\n').at(-1) ?? '{}') as Record<string, unknown>;
    expect(evaluated).toMatchObject({ policy: 'model', episodes: 1, errors: 0 });
    const clash = await sqlenv(['sft', '--model', tiny, '--data', data, '--full', '--lora-rank', '4', '--steps', '1', '--out', join(root, 'y')]);
    expect(clash.code).toBe(2);
    expect(clash.stderr).toContain('--full trains the base weights');
  }, 300_000);

  it('bad input is a usage error naming the line', async () => {
    const { writeFileSync } = await import('node:fs');
    const bad = join(root, 'bad.jsonl');
    const cases: Array<[string, RegExp]> = [
      ['{"input_ids": [1, 2, 3], "loss_mask": [0, 1, 1]}\n{"input_ids": [1,', /bad\.jsonl line 2: not valid JSON/],
      ['{"input_ids": [1, 2, 3], "loss_mask": [0, 1]}', /bad\.jsonl line 1: loss_mask has 2 entries for 3 input_ids/],
      ['{"input_ids": [1, 2, 3], "loss_mask": [0, 0, 0]}', /bad\.jsonl line 1: no targets/],
      [JSON.stringify({ input_ids: Array(3000).fill(1), loss_mask: [0, ...Array(2999).fill(1)] }), /bad\.jsonl line 1: 3000 tokens are more than the model's context of 2048/],
    ];
    for (const [content, message] of cases) {
      writeFileSync(bad, `${content}\n`);
      const result = await sqlenv(['sft', '--model', tiny, '--data', bad, '--steps', '1', '--out', join(root, 'never')]);
      expect(result.code, content.slice(0, 60)).toBe(2);
      expect(result.stderr).toMatch(message);
    }
    const missing = await sqlenv(['sft', '--model', tiny, '--data', bad, '--out', join(root, 'never')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/steps/);
  }, 120_000);
});
