import { describe, expect, it } from 'vitest';
import { AppError, boxMullerNormals, mulberry32 } from '@sqlenv/shared';
import { checkpoint, gradients } from './autodiff.ts';
import { attention, causalMask, crossEntropy, linear, maskedSoftmax, rmsNorm, silu, tokenLogProbs } from './composites.ts';
import type { Tensor } from './graph-core.ts';
import { Graph } from './graph.ts';
import type { GradInput } from './grad-cases.ts';
import { gradCheck, relativeError, sampleInputs } from './grad-check.ts';
import { tensor, toNumbers } from './tensor-data.ts';
import { runOnce } from './testing/run-once.ts';

type Build = (g: Graph, x: readonly Tensor[]) => Tensor;

function at(x: readonly Tensor[], i: number): Tensor {
  const t = x[i];
  if (!t) throw new Error(`missing input ${i}`);
  return t;
}

/** A constant with fixed pseudo-random values, dtype taken from a reference tensor. */
function randConst(g: Graph, like: Tensor, dims: number[], seed: number, scale = 0.5): Tensor {
  const n = dims.reduce((a, b) => a * b, 1);
  return g.constant(tensor(like.dtype, dims, boxMullerNormals(mulberry32(seed), n).map((v) => Math.fround(v * scale))));
}

/**
 * Two pre-norm attention layers whose q and v projections carry LoRA adapters
 * (Hu et al. 2021: W x + B A x · α/r). Inputs are only the LoRA tensors; the
 * hidden states and all base weights are constants, so gradients flow to A and B only.
 */
const D = 4;
const H = 2;
const R = 2;
const loraBlockOf = (checkpointed: boolean): Build => (g, lora) => {
  const ref = at(lora, 0);
  let h = randConst(g, ref, [2, 3, D], 7, 1); // (B, T, D)
  const mask = causalMask(g, 3, ref.dtype); // (T, T)
  for (let layer = 0; layer < 2; layer++) {
    const body = (): Tensor => layerBody(g, lora, ref, mask, layer, h);
    h = checkpointed ? checkpoint(g, body) : body();
  }
  return h;
};
const loraBlock = loraBlockOf(false);
function layerBody(g: Graph, lora: readonly Tensor[], ref: Tensor, mask: Tensor, layer: number, h: Tensor): Tensor {
  {
    const w = (name: number): Tensor => randConst(g, ref, [D, D], 100 * layer + name);
    const [aq, bq, av, bv] = [at(lora, 4 * layer), at(lora, 4 * layer + 1), at(lora, 4 * layer + 2), at(lora, 4 * layer + 3)];
    const xn = rmsNorm(h, randConst(g, ref, [D], 50 + layer, 1)); // (B, T, D)
    const adapt = (base: Tensor, a: Tensor, b: Tensor): Tensor => g.add(linear(xn, base), g.mul(linear(linear(xn, a), b), 2 / R)); // (B, T, D)
    const heads = (t: Tensor): Tensor => g.transpose(g.reshape(t, [2, 3, H, D / H]), [0, 2, 1, 3]); // (B, H, T, Dh)
    const q = heads(adapt(w(1), aq, bq));
    const k = heads(linear(xn, w(2)));
    const v = heads(adapt(w(3), av, bv));
    const ctx = g.reshape(g.transpose(attention(q, k, v, mask), [0, 2, 1, 3]), [2, 3, D]); // (B, T, D)
    h = g.add(h, linear(ctx, w(4))); // residual
    h = g.add(h, linear(silu(linear(h, w(5))), w(6))); // small MLP with SiLU
  }
  return h;
}
const loraInputs: GradInput[] = Array.from({ length: 8 }, (_, i) => ({ shape: i % 2 === 0 ? [R, D] : [D, R] }));

/**
 * ONNX Runtime fuses x·sigmoid(x) into QuickGelu, which has no float64 CPU kernel; the fusion only
 * fires once the sigmoid has no other consumer, as in the forward copy of a checkpointed region.
 */
const FLOAT64_SESSION = { sessionConfig: { 'optimization.disable_specified_optimizers': 'QuickGeluFusion' } } as const;

const composites: { name: string; inputs: GradInput[]; build: Build }[] = [
  { name: 'broadcast add of a bias over batch and time', inputs: [{ shape: [2, 3, 4] }, { shape: [4] }], build: (g, x) => g.tanh(g.add(at(x, 0), at(x, 1))) },
  { name: 'broadcast mul with size-1 axes on both sides', inputs: [{ shape: [2, 1, 4] }, { shape: [3, 1] }], build: (g, x) => g.mul(at(x, 0), at(x, 1)) },
  {
    name: 'a tensor used by several consumers',
    inputs: [{ shape: [3, 4] }],
    build: (g, x) => {
      const t = at(x, 0);
      // t feeds Exp, Mul, MatMul and Transpose: four gradient contributions to sum.
      return g.add(g.reduceSum(g.mul(g.exp(t), t), [1]), g.reduceSum(g.matMul(t, g.transpose(t)), [1])); // (3)
    },
  },
  {
    name: 'masked softmax (bool mask and additive mask)',
    inputs: [{ shape: [2, 3, 3] }],
    build: (g, x) => {
      const s = at(x, 0);
      const keep = g.constant(tensor('bool', [3, 3], [true, false, false, true, true, false, true, true, true]));
      return g.add(maskedSoftmax(s, keep), maskedSoftmax(s, causalMask(g, 3, s.dtype)));
    },
  },
  { name: 'RMSNorm (input and weight)', inputs: [{ shape: [2, 3, 4] }, { shape: [4] }], build: (g, x) => rmsNorm(at(x, 0), at(x, 1)) },
  {
    name: 'cross-entropy and token log-probs',
    inputs: [{ shape: [2, 3, 5] }],
    build: (g, x) => {
      const logits = at(x, 0);
      const targets = g.constant(tensor('int64', [2, 3], [0, 4, 2, 1, 1, 3]));
      const weights = g.constant(tensor(logits.dtype, [2, 3], [1, 1, 0, 1, 0, 1]));
      return g.add(g.unsqueeze(crossEntropy(logits, targets, { weights }), [0]), g.reduceSum(tokenLogProbs(logits, targets, { lse: false }), [1]));
    },
  },
  { name: 'two-layer attention block, gradients w.r.t. LoRA A/B only', inputs: loraInputs, build: loraBlock },
  { name: 'the same block with each layer checkpointed (recomputed in the backward pass)', inputs: loraInputs, build: loraBlockOf(true) },
];

describe('composite gradients match finite differences (float64)', () => {
  it.each(composites.map((c, i) => [c.name, c, i] as const))('%s', async (_name, c, i) => {
    const next = mulberry32(500 + i);
    const values = sampleInputs(c.inputs, next).map((v) => v.map((x) => x * 0.5));
    const result = await gradCheck(c.build, c.inputs, { dtype: 'float64', values, projection: boxMullerNormals(next, 256), numeric: true, session: FLOAT64_SESSION });
    result.analytic.forEach((a, k) => {
      expect(Math.max(...(result.numeric[k] ?? []).map(Math.abs))).toBeGreaterThan(1e-4);
      expect(relativeError(a, result.numeric[k] ?? [])).toBeLessThanOrEqual(1e-6);
    });
  });

  it('float32 gradients of the LoRA block agree with float64', async () => {
    const next = mulberry32(42);
    const values = sampleInputs(loraInputs, next).map((v) => v.map((x) => Math.fround(x * 0.5)));
    const projection = boxMullerNormals(next, 256).map(Math.fround);
    const f64 = await gradCheck(loraBlock, loraInputs, { dtype: 'float64', values, projection, numeric: false });
    const f32 = await gradCheck(loraBlock, loraInputs, { dtype: 'float32', values, projection, numeric: false });
    f64.analytic.forEach((a, k) => expect(relativeError(f32.analytic[k] ?? [], a)).toBeLessThanOrEqual(1e-4));
  });
});

describe('gradients()', () => {
  it('checkpointing re-emits each region once in the backward pass, gated on its gradient, with the same gradients', async () => {
    const next = mulberry32(43);
    const values = sampleInputs(loraInputs, next);
    const projection = boxMullerNormals(next, 256);
    const plain = await gradCheck(loraBlock, loraInputs, { dtype: 'float64', values, projection, numeric: false });
    const recomputed = await gradCheck(loraBlockOf(true), loraInputs, { dtype: 'float64', values, projection, numeric: false, session: FLOAT64_SESSION });
    plain.analytic.forEach((a, k) => expect(relativeError(recomputed.analytic[k] ?? [], a)).toBeLessThanOrEqual(1e-12));
    // The backward graph holds a second copy of each layer's forward (one Softmax per layer more), and
    // the copies read their inputs through Where gates (LoRA factors and the layer's input).
    const count = (build: Build, op: string): number => {
      const g = new Graph();
      const lora = loraInputs.map((spec, i) => g.input(`lora_${i}`, 'float64', spec.shape));
      const out = build(g, lora);
      gradients(g.reduceSum(g.mul(out, out)), lora);
      return g.nodes.filter((n) => n.opType === op).length;
    };
    expect(count(loraBlock, 'Softmax')).toBe(2);
    expect(count(loraBlockOf(true), 'Softmax')).toBe(4);
    expect(count(loraBlockOf(true), 'Where') - count(loraBlock, 'Where')).toBeGreaterThanOrEqual(2 * 4);
  });

  it('emits gradients only for the requested tensors (LoRA), none for frozen weights', () => {
    const build = (withBase: boolean): { backward: ReturnType<Graph['nodes']['slice']>; frozen: Tensor[] } => {
      const g = new Graph();
      const x = g.input('x', 'float32', ['B', 4]);
      const w = g.initializer('w', tensor('float32', [4, 4], new Float32Array(16).fill(0.1)));
      const a = g.input('lora_a', 'float32', [2, 4]);
      const b = g.input('lora_b', 'float32', [4, 2]);
      const wT = g.transpose(w, [1, 0]);
      const y = g.add(g.matMul(x, wT), linear(linear(x, a), b)); // (B, 4)
      const loss = g.reduceSum(g.mul(y, y));
      const before = g.nodes.length;
      const grads = gradients(loss, withBase ? [a, b, w] : [a, b]);
      expect(grads[0]?.shape).toEqual([2, 4]);
      expect(grads[1]?.shape).toEqual([4, 2]);
      return { backward: g.nodes.slice(before), frozen: [w, wT] };
    };
    const products = (nodes: readonly { opType: string }[]): number => nodes.filter((n) => n.opType === 'MatMul' || n.opType === 'Gemm').length;
    const lora = build(false);
    // u = x·Aᵀ, v = u·Bᵀ: du = dv·B, dB = dvᵀ·u, dA = duᵀ·x: three products, and nothing touches W.
    expect(products(lora.backward)).toBe(3);
    expect(lora.backward.some((n) => n.inputs.some((t) => t !== null && lora.frozen.includes(t)))).toBe(false);
    // Asking for W too adds its product (xᵀ·dy).
    expect(products(build(true).backward)).toBe(4);
  });

  it('differentiates through Concat, Slice and Reshape over symbolic dims', async () => {
    const g = new Graph();
    const x = g.input('x', 'float32', ['B', 'T', 3]);
    const y = g.concat([x, g.mul(x, 2)], 1); // (B, T+T, 3)
    const z = g.reshape(g.slice(y, { axis: 1, start: 1, end: Infinity }), [-1, 3]); // (?, 3)
    const [dx] = gradients(g.reduceSum(g.mul(z, z)), [x]);
    g.output('dx', dx!);
    const values = [1, 2, 3, 4, 5, 6, -1, -2, -3, 0.5, 1.5, 2.5, 7, 8, 9, 1, 1, 1];
    const out = await runOnce(g, { x: tensor('float32', [2, 3, 3], values) });
    // Position t of x appears at t in the first copy (dropped when t = 0) and doubled in the second: d/dx = [t > 0]·2x + 8x.
    const expected = values.map((v, i) => (Math.floor(i / 3) % 3 > 0 ? 2 * v : 0) + 8 * v);
    expect(out.dx!.dims).toEqual([2, 3, 3]);
    expect(toNumbers(out.dx!)).toEqual(expected);
  });

  it('returns zeros for a tensor the loss does not depend on', async () => {
    const g = new Graph();
    const x = g.input('x', 'float32', [3]);
    const unused = g.input('unused', 'float32', [2, 2]);
    const [dx, du] = gradients(g.reduceSum(g.mul(x, x)), [x, unused]);
    g.output('dx', dx!);
    g.output('du', du!);
    const out = await runOnce(g, { x: tensor('float32', [3], [1, 2, 3]), unused: tensor('float32', [2, 2], [1, 1, 1, 1]) });
    expect(toNumbers(out.dx!)).toEqual([2, 4, 6]);
    expect(toNumbers(out.du!)).toEqual([0, 0, 0, 0]);
  });

  it('refuses to differentiate through a Loop (even via an outer-scope capture)', () => {
    const g = new Graph();
    const x = g.input('x', 'float32', [3]);
    const { carried } = g.loop({ maxTrips: 2, carried: [g.zerosLike(x)], body: (b, { carried: [acc] }) => ({ carried: [b.add(acc!, x)] }) });
    const loss = g.reduceSum(carried[0]!);
    expect(() => gradients(loss, [x])).toThrow(/op Loop .* has no gradient rule/);
  });

  it('rejects a non-scalar loss without a seed, saying what it expected', () => {
    const g = new Graph();
    const x = g.input('x', 'float32', [3]);
    expect(() => gradients(g.mul(x, 2), [x])).toThrow(AppError);
    expect(() => gradients(g.mul(x, 2), [x])).toThrow(/expected a scalar loss/);
  });

  it('stops at zero-gradient ops (comparisons, random draws) instead of failing', async () => {
    const g = new Graph();
    const x = g.input('x', 'float32', [4]);
    const noise = g.randomUniformLike(x, { seed: 3 });
    const gate = g.cast(g.greater(x, 0), 'float32');
    const loss = g.reduceSum(g.mul(g.mul(x, gate), noise));
    const [dx] = gradients(loss, [x]);
    g.output('dx', dx!);
    g.output('noise', noise);
    const out = await runOnce(g, { x: tensor('float32', [4], [1, -1, 2, -2]) });
    const n = toNumbers(out.noise!);
    expect(toNumbers(out.dx!)).toEqual([n[0], 0, n[2], 0]);
  });
});
