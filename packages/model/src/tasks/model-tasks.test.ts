import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { modelGenerate, modelInit, modelLogits, parseTokenList, resolveConfigArg } from './model-tasks.ts';
import { countParameters } from '../memory/memory-estimate.ts';
import { toHfConfig } from '../io/config.ts';
import { presetConfig } from '../io/presets.ts';
import { referenceForward } from '../graphs/reference-forward.ts';
import { loadModel } from '../io/weights.ts';
import { initLoraWeights, mergeLora, parseLoraConfig } from '../graphs/lora.ts';
import { saveAdapterDir } from '../io/peft-adapter.ts';
import { modelFingerprint } from '../io/model-dir.ts';

const root = mkdtempSync(join(tmpdir(), 'sqlenv-commands-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('model commands', () => {
  it('init writes a loadable random checkpoint from a preset, inline JSON or a config.json file', async () => {
    const a = await modelInit({ config: 'tiny-qwen3', out: join(root, 'a'), seed: 3, dtype: 'BF16' });
    expect(a.files).toEqual(['config.json', 'model.safetensors']);
    expect(a.summary).toContain('qwen3');
    expect(loadModel(a.dir).config).toEqual(presetConfig('tiny-qwen3'));
    const inline = JSON.stringify({ ...presetConfig('tiny-llama'), numLayers: 1 });
    expect((await modelInit({ config: inline, out: join(root, 'b') })).config.numLayers).toBe(1);
    const file = join(root, 'hf-config.json');
    writeFileSync(file, JSON.stringify(toHfConfig(presetConfig('tiny-qwen2'))));
    const c = await modelInit({ config: file, out: join(root, 'c'), maxShardBytes: 50_000 });
    expect(c.files).toContain('model.safetensors.index.json');
    expect(readdirSync(c.dir).filter((f) => f.endsWith('.safetensors')).length).toBeGreaterThan(1);
    expect(() => resolveConfigArg('no-such-preset')).toThrow(/neither a preset/);
  });

  it('logits --json prints the final-position logits as one JSON array, equal to the reference', async () => {
    const dir = join(root, 'a');
    const { output } = await modelLogits({ model: dir, tokens: '1,2,3,256', json: true });
    const logits = JSON.parse(output) as number[];
    const { config, weights } = loadModel(dir);
    expect(logits).toHaveLength(config.vocabSize);
    const ref = referenceForward(config, weights, [1, 2, 3, 256]).at(-1) as Float64Array;
    const scale = Math.max(...Array.from(ref, Math.abs));
    logits.forEach((x, i) => expect(Math.abs(x - ref[i]!)).toBeLessThanOrEqual(1e-5 * scale));
    const text = await modelLogits({ model: dir, tokens: [1, 2, 3, 256] });
    expect(text.output.split('\n')).toHaveLength(10);
    expect(() => parseTokenList('1,x')).toThrow(/comma-separated/);
    await expect(modelLogits({ model: dir, tokens: '9999' })).rejects.toMatchObject({ code: 'VALIDATION' });
  });

  it('logits and generate apply a PEFT adapter directory (--adapter)', async () => {
    const dir = join(root, 'a');
    const { config, weights } = loadModel(dir);
    const lora = parseLoraConfig({ rank: 2, alpha: 8, targets: ['q_proj', 'down_proj'] });
    const adapter = { lora, weights: initLoraWeights(config, lora, { seed: 2, bStd: 0.3 }) };
    saveAdapterDir(join(root, 'adapter'), config, adapter);
    const tokens = [5, 6, 7, 256];
    const { logits } = await modelLogits({ model: dir, tokens, adapter: join(root, 'adapter') });
    const ref = referenceForward(config, mergeLora(config, weights, lora, adapter.weights), tokens).at(-1) as Float64Array;
    const base = referenceForward(config, weights, tokens).at(-1) as Float64Array;
    const scale = Math.max(...Array.from(ref, Math.abs));
    logits.forEach((x, i) => expect(Math.abs(x - ref[i]!)).toBeLessThanOrEqual(1e-5 * scale));
    expect(Math.max(...Array.from(ref, (x, i) => Math.abs(x - base[i]!)))).toBeGreaterThan(1e-3);
    const plain = await modelGenerate({ model: dir, prompt: 'hi', maxNewTokens: 6, seed: 4, temperature: 1 });
    const adapted = await modelGenerate({ model: dir, prompt: 'hi', maxNewTokens: 6, seed: 4, temperature: 1, adapter: join(root, 'adapter') });
    expect(adapted.logprobs).not.toEqual(plain.logprobs);
    await expect(modelLogits({ model: dir, tokens, adapter: join(root, 'missing') })).rejects.toMatchObject({ code: 'MODEL' });
  });

  it('fingerprints a model directory: same checkpoint same print, another seed another', async () => {
    const a = modelFingerprint(join(root, 'a'));
    expect(a).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(modelFingerprint(join(root, 'a'))).toBe(a);
    await modelInit({ config: 'tiny-qwen3', out: join(root, 'a2'), seed: 4, dtype: 'BF16' });
    expect(modelFingerprint(join(root, 'a2'))).not.toBe(a);
    expect(() => modelFingerprint(join(root, 'nothing'))).toThrow(/config.json/);
  });

  it('generate continues a chat prompt with the byte tokenizer', async () => {
    const result = await modelGenerate({ model: join(root, 'a'), prompt: 'How many singers?', maxNewTokens: 5, seed: 1 });
    expect(result.tokens.length).toBeGreaterThan(0);
    expect(result.tokens.length).toBeLessThanOrEqual(5);
    expect(result.logprobs).toHaveLength(result.tokens.length);
    expect(typeof result.text).toBe('string');
    expect(result.promptIds.at(-1)).toBe(10); // "...<think>\n\n</think>\n\n" ends in a newline byte
  });

  it('counts parameters like the published model cards', () => {
    // Qwen3-0.6B: 0.6B parameters, 0.44B without the embedding.
    const qwen3 = presetConfig('qwen3-0.6b');
    expect(countParameters(qwen3)).toBe(596_049_920);
    expect(countParameters(qwen3) - qwen3.vocabSize * qwen3.hiddenSize).toBeCloseTo(0.44e9, -7);
  });
});
