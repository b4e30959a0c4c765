import { describe, expect, it } from 'vitest';
import { gradients } from './autodiff.ts';
import { crossEntropy, linear } from './composites.ts';
import { Graph } from './graph.ts';
import { createSession } from './runtime/session.ts';
import { tensor, toNumbers, type TensorData } from './tensor-data.ts';
import { boxMullerNormals, mulberry32 } from '@sqlenv/shared';

/**
 * End-to-end: a 2-16-2 tanh MLP learns XOR-style quadrants with plain SGD,
 * every gradient coming from the emitted ONNX backward graph.
 */
describe('training with emitted gradients', () => {
  it('an MLP learns a toy task with SGD (loss falls by 10x)', async () => {
    const N = 32;
    const HIDDEN = 16;
    const next = mulberry32(7);
    const points = Array.from({ length: N }, () => [next() * 2 - 1, next() * 2 - 1] as const);
    const labels = points.map(([a, b]) => (a * b > 0 ? 1 : 0)); // XOR of the signs

    const g = new Graph();
    const x = g.input('x', 'float32', ['N', 2]);
    const y = g.input('y', 'int64', ['N']);
    const params = {
      w1: g.input('w1', 'float32', [HIDDEN, 2]),
      b1: g.input('b1', 'float32', [HIDDEN]),
      w2: g.input('w2', 'float32', [2, HIDDEN]),
      b2: g.input('b2', 'float32', [2]),
    };
    const hidden = g.tanh(linear(x, params.w1, params.b1)); // (N, 16)
    const logits = linear(hidden, params.w2, params.b2); // (N, 2)
    const loss = crossEntropy(logits, y);
    g.output('loss', loss);
    const names = Object.keys(params) as (keyof typeof params)[];
    gradients(loss, names.map((k) => params[k])).forEach((d, i) => g.output(`d_${names[i]}`, d));

    const session = await createSession(g.toModel(), { mode: 'direct' });
    const init = (dims: number[], scale: number): Float32Array => Float32Array.from(boxMullerNormals(next, dims.reduce((a, b) => a * b, 1)), (v) => v * scale);
    const values: Record<keyof typeof params, Float32Array> = { w1: init([HIDDEN, 2], 1), b1: init([HIDDEN], 0.1), w2: init([2, HIDDEN], 0.3), b2: new Float32Array(2) };
    const feeds = (): Record<string, TensorData> => ({
      x: tensor('float32', [N, 2], points.flat()),
      y: tensor('int64', [N], labels),
      ...Object.fromEntries(names.map((k) => [k, tensor('float32', params[k].shape as number[], values[k])])),
    });

    const learningRate = 0.5;
    const losses: number[] = [];
    for (let step = 0; step < 400; step++) {
      const out = await session.run(feeds());
      losses.push(toNumbers(out.loss!)[0]!);
      for (const k of names) {
        const grad = out[`d_${k}`]!.data as Float32Array;
        values[k] = values[k].map((v, i) => v - learningRate * grad[i]!);
      }
    }
    await session.close();
    const first = losses[0]!;
    const last = losses[losses.length - 1]!;
    expect(Number.isFinite(last)).toBe(true);
    expect(last).toBeLessThan(first / 10);
  });
});
