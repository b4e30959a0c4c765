import { tmpdir } from 'node:os';
import { probeExecutionProvider, type SessionConfig } from '@sqlenv/onnx-graph';
import { afterAll, describe, expect, it } from 'vitest';
import { presetConfig } from '../io/presets.ts';
import { randomWeights } from '../io/random-checkpoint.ts';
import { uniformsForSeed } from './batch.ts';
import { Generator } from './generator.ts';
import { Scorer } from './scorer.ts';

/**
 * The graphs on ONNX Runtime's WebGPU provider, where this machine has a Vulkan driver (a GPU's, or
 * Mesa's software one: `mesa-vulkan-drivers`); skipped with the reason elsewhere. WebGPU runs the
 * graphs' loops on the CPU provider and the rest on the device, with copies between them, so this
 * is where a provider-only failure shows: an empty past crashed the process here (kv-cache.ts).
 */
process.env['XDG_RUNTIME_DIR'] ??= tmpdir();
const unavailable = await probeExecutionProvider('webgpu').then(
  () => undefined,
  (e: unknown) => (e instanceof Error ? e.message.split('\n')[0] : String(e)),
);
if (unavailable !== undefined) console.warn(`WebGPU tests skipped: ${unavailable}`);

const config = presetConfig('tiny-qwen3');
const weights = randomWeights(config, { seed: 5, initStd: 0.15 });
const prompts = [
  [256, 10, 20, 30],
  [256, 1, 2, 3, 4, 5, 6, 7, 8],
  [256, 99, 98, 97],
];
const closers: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const close of closers) await close();
});
/** Every value of `a` within 1e-4 of the same place in `b` (log-probs on the device against the CPU). */
const expectClose = (a: number[][], b: number[][]): void => {
  const [x, y] = [a.flat(), b.flat()];
  expect(x.length).toBe(y.length);
  x.forEach((v, i) => expect(Math.abs(v - (y[i] as number))).toBeLessThan(1e-4));
};
const generatorOn = async (provider: SessionConfig['provider']): Promise<Generator> => {
  const g = await Generator.create(config, weights, { prefillChunkTokens: 3, session: { provider } });
  closers.push(() => g.close());
  return g;
};

describe.skipIf(unavailable !== undefined)('the WebGPU provider', () => {
  it('generates what the CPU generates: a fresh batch, then a second turn against the kept caches', async () => {
    const [gpu, cpu] = [await generatorOn('webgpu'), await generatorOn('cpu')];
    expect(gpu.sessionRecord['executionProvider']).toBe('webgpu');
    const turn = async (g: Generator): Promise<{ first: number[][]; second: number[][]; logprobs: number[][] }> => {
      const first = await g.runRows(
        prompts.map((inputIds, b) => ({ inputIds, uniforms: uniformsForSeed(b, 6), temperature: 0 })),
        { steps: 6, keepCache: true, stopIds: [] },
      );
      const second = await g.runRows(
        first.map((r, b) => ({ inputIds: [r.tokens.at(-1) as number, 40 + b, 41], cache: r.cache, uniforms: uniformsForSeed(b + 10, 5), temperature: 0 })),
        { steps: 5, keepCache: false, stopIds: [] },
      );
      return { first: first.map((r) => r.tokens), second: second.map((r) => r.tokens), logprobs: second.map((r) => r.logprobs) };
    };
    const [onGpu, onCpu] = [await turn(gpu), await turn(cpu)];
    expect(onGpu.first).toEqual(onCpu.first);
    expect(onGpu.second).toEqual(onCpu.second);
    expectClose(onGpu.logprobs, onCpu.logprobs);
  }, 240_000);

  it('scores sequences as the CPU does (≤ 1e-4)', async () => {
    const [gpu, cpu] = await Promise.all([Scorer.create(config, weights, { session: { provider: 'webgpu' } }), Scorer.create(config, weights)]);
    closers.push(() => gpu.close(), () => cpu.close());
    expectClose(await gpu.score(prompts), await cpu.score(prompts));
  }, 240_000);
});
