import { describe, expect, it } from 'vitest';
import { ErrorCode } from '@sqlenv/shared';
import { causalMask, logSoftmaxLse, rmsNorm } from './composites.ts';
import { Graph } from './graph.ts';
import { halfBitsToFloat, floatToHalfBits, tensor, toNumbers } from './tensor-data.ts';
import { runOnce } from './testing/run-once.ts';
import { appErrorOf } from '@sqlenv/shared/testing';

describe('build-time shape and dtype checks', () => {
  it('says expected vs got for mismatched MatMul dims', () => {
    const g = new Graph();
    const e = appErrorOf(() => g.matMul(g.input('a', 'float32', ['B', 3, 4]), g.input('b', 'float32', [5, 6])));
    expect(e.code).toBe(ErrorCode.GRAPH);
    expect(e.message).toMatch(/MatMul: inner dims must match: expected 4 .* got 5/);
  });

  it('says expected vs got for dtype mismatches', () => {
    const g = new Graph();
    const e = appErrorOf(() => g.add(g.input('a', 'float32', [2]), g.input('b', 'float64', [2])));
    expect(e.message).toMatch(/Add: dtypes must match: expected float32 .* got float64/);
    expect(appErrorOf(() => g.exp(g.input('i', 'int64', [2]))).message).toMatch(/Exp: expected a float tensor .* got int64/);
    expect(appErrorOf(() => g.gather(g.input('t', 'float32', [5, 2]), g.input('f', 'float32', [3]))).message).toMatch(/expected int64 \| int32 indices, got float32/);
  });

  it('rejects shapes that do not broadcast, naming the axis', () => {
    const g = new Graph();
    const e = appErrorOf(() => g.mul(g.input('a', 'float32', ['B', 3]), g.input('b', 'float32', [4])));
    expect(e.message).toMatch(/do not broadcast: at axis -1 expected equal dims or 1, got 3 and 4/);
  });

  it('checks reshape element counts and infers product symbols', () => {
    const g = new Graph();
    const x = g.input('x', 'float32', ['B', 'T', 64]);
    expect(g.reshape(x, [-1, 64]).shape).toEqual(['B*T', 64]);
    expect(g.reshape(x, ['B', 'T', 4, 16]).shape).toEqual(['B', 'T', 4, 16]);
    expect(g.reshape(x, [0, 0, 8, -1]).shape).toEqual(['B', 'T', 8, 8]);
    expect(appErrorOf(() => g.reshape(x, ['B', 'T', 60])).message).toMatch(/element counts differ: expected 64\*B\*T .* got 60\*B\*T/);
  });

  it('checks axes, permutations, squeeze sizes and Loop bodies', () => {
    const g = new Graph();
    const x = g.input('x', 'float32', [2, 3]);
    expect(appErrorOf(() => g.softmax(x, 2)).message).toMatch(/Softmax: axis expected in \[-2, 1\], got 2/);
    expect(appErrorOf(() => g.transpose(x, [0, 0])).message).toMatch(/expected a permutation of 0..1, got \[0, 0\]/);
    expect(appErrorOf(() => g.squeeze(x, [0])).message).toMatch(/axis 0 must have size 1: expected 1, got 2/);
    expect(appErrorOf(() => g.loop({ maxTrips: 2, carried: [x], body: (b) => ({ carried: [b.cast(x, 'int64')] }) })).message).toMatch(
      /Loop: carried\[0\]: expected float32 of rank 2, got .*int64/,
    );
    expect(appErrorOf(() => g.input('x', 'float32', [1])).message).toMatch(/expected a name unique in the model/);
  });

  it('refuses tensors from another graph', () => {
    const a = new Graph();
    const b = new Graph();
    expect(appErrorOf(() => b.neg(a.input('x', 'float32', [1]))).message).toMatch(/belongs to a different graph/);
  });
});

describe('ops run in ONNX Runtime with the inferred shapes', () => {
  it('MatMul broadcasts batch dims; Gather embeds; Sin/Cos; Concat/Slice over symbolic dims', async () => {
    const g = new Graph();
    const x = g.input('x', 'float32', ['B', 2, 3]);
    const w = g.initializer('w', tensor('float32', [3, 2], [1, 0, 0, 1, 1, 1]));
    const y = g.matMul(x, w); // (B, 2, 2)
    const table = g.initializer('table', tensor('float32', [4, 2], [0, 0, 1, 1, 2, 2, 3, 3]));
    const ids = g.input('ids', 'int64', ['B', 'T']);
    const emb = g.gather(table, ids); // (B, T, 2)
    const rope = g.concat([g.sin(emb), g.cos(emb)], -1); // (B, T, 4)
    const tail = g.slice(rope, { axis: 1, start: 1, end: Infinity }); // (B, T-?, 4)
    expect(y.shape).toEqual(['B', 2, 2]);
    expect(rope.shape).toEqual(['B', 'T', 4]);
    g.output('y', y);
    g.output('tail', tail);
    const out = await runOnce(g, { x: tensor('float32', [1, 2, 3], [1, 2, 3, 4, 5, 6]), ids: tensor('int64', [1, 3], [1, 3, 2]) });
    expect(toNumbers(out.y!)).toEqual([4, 5, 10, 11]);
    expect(out.tail!.dims).toEqual([1, 2, 4]);
    const t = toNumbers(out.tail!);
    expect(t[0]).toBeCloseTo(Math.sin(3), 6);
    expect(t[2]).toBeCloseTo(Math.cos(3), 6);
  });

  it('TopK, ArgMax, CumSum, Range, Where/Equal/Less, Trilu, Expand', async () => {
    const g = new Graph();
    const x = g.input('x', 'float32', [2, 4]);
    const { values, indices } = g.topK(x, 2);
    g.output('values', values);
    const dynamicK = g.topK(x, g.input('k', 'int64', []), { largest: false });
    expect(dynamicK.values.shape[1]).toMatch(/^top_k/);
    g.output('smallest', dynamicK.values);
    g.output('indices', indices);
    g.output('argmax', g.argMax(x, -1));
    g.output('cumsum', g.cumSum(x, 1));
    g.output('range', g.range(2, 11, 3));
    g.output('where', g.where(g.less(x, 0), g.neg(x), x));
    g.output('eq', g.cast(g.equal(x, 3), 'int32'));
    g.output('mask', causalMask(g, 3));
    g.output('expanded', g.expand(g.range(0, 3, 1, 'float32'), [2, 3]));
    const out = await runOnce(g, { x: tensor('float32', [2, 4], [1, 3, -2, 0, 5, -1, 4, 3]), k: tensor('int64', [], [1]) });
    expect(toNumbers(out.values!)).toEqual([3, 1, 5, 4]);
    expect(toNumbers(out.smallest!)).toEqual([-2, -1]);
    expect(toNumbers(out.indices!)).toEqual([1, 0, 0, 2]);
    expect(toNumbers(out.argmax!)).toEqual([1, 0]);
    expect(toNumbers(out.cumsum!)).toEqual([1, 4, 2, 2, 5, 4, 8, 11]);
    expect(toNumbers(out.range!)).toEqual([2, 5, 8]);
    expect(toNumbers(out.where!)).toEqual([1, 3, 2, 0, 5, 1, 4, 3]);
    expect(toNumbers(out.eq!)).toEqual([0, 1, 0, 0, 0, 0, 0, 1]);
    expect(toNumbers(out.mask!)).toEqual([0, -1e9, -1e9, 0, 0, -1e9, 0, 0, 0]);
    expect(toNumbers(out.expanded!)).toEqual([0, 1, 2, 0, 1, 2]);
  });

  it('Slice/Range take a declared result dim so symbolic shapes line up (checked where inferable)', async () => {
    const g = new Graph();
    const full = g.input('full', 'int64', ['B', 'S']); // a past of S − T slots, then T new ones
    const recent = g.input('recent', 'int64', ['B', 'T']);
    const past = g.sub(g.shape(full, 1, 2), g.shape(recent, 1, 2)); // (1): S − T
    const tail = g.slice(full, { axis: 1, start: past, end: Infinity, dim: 'T' }); // (B, T)
    expect(tail.shape).toEqual(['B', 'T']);
    expect(g.slice(full, { axis: 1, start: past, end: Infinity }).shape[1]).toMatch(/^slice/); // undeclared: fresh
    const slots = g.range(g.squeeze(past, [0]), g.squeeze(g.shape(full, 1, 2), [0]), 1, 'int64', { dim: 'T' }); // (T): S − T … S − 1
    expect(slots.shape).toEqual(['T']);
    g.output('sum', g.add(g.add(tail, recent), slots)); // (B, T): only builds because the dims agree
    // The last entries of a symbolic dim have a static size.
    expect(g.slice(full, { axis: 1, start: -1, end: Infinity }).shape).toEqual(['B', 1]);
    // A declared dim that contradicts what is inferred, or is not a dim, is refused.
    expect(() => g.slice(full, { axis: 1, start: 0, end: 2, dim: 3 })).toThrow(/Slice: declared dim 3 contradicts the inferred one: expected 2, got 3/);
    expect(() => g.slice(full, { axis: 1, start: 0, end: Infinity, dim: 'T' })).toThrow(/expected S, got T/);
    expect(() => g.range(0, 4, 1, 'int64', { dim: 5 })).toThrow(/Range: declared dim 5 contradicts the inferred one: expected 4, got 5/);
    expect(() => g.range(0, g.squeeze(past, [0]), 1, 'int64', { dim: -1 })).toThrow(/expected the declared dim to be an integer >= 0 or a symbol name, got -1/);
    const out = await runOnce(g, { full: tensor('int64', [1, 5], [10, 20, 30, 40, 50]), recent: tensor('int64', [1, 2], [1, 2]) });
    expect(out.sum!.dims).toEqual([1, 2]);
    expect(toNumbers(out.sum!)).toEqual([40 + 1 + 3, 50 + 2 + 4]);
  });

  it('RandomUniformLike is reproducible with a seed and within [low, high)', async () => {
    const build = (seed: number): Graph => {
      const g = new Graph();
      g.output('r', g.randomUniformLike(g.input('x', 'float32', [64]), { low: -2, high: 3, seed }));
      return g;
    };
    const feed = { x: tensor('float32', [64], new Float32Array(64)) };
    const a = toNumbers((await runOnce(build(5), feed)).r!);
    const b = toNumbers((await runOnce(build(5), feed)).r!);
    const c = toNumbers((await runOnce(build(6), feed)).r!);
    expect(a).toEqual(b);
    expect(a).not.toEqual(c);
    expect(Math.min(...a)).toBeGreaterThanOrEqual(-2);
    expect(Math.max(...a)).toBeLessThan(3);
  });

  it('ScatterND/ScatterElements with add, GatherElements, and float16 casts', async () => {
    const g = new Graph();
    const base = g.full([3, 2], 0, 'float32');
    const nd = g.scatterND(base, g.constant(tensor('int64', [2, 1], [1, 1])), g.constant(tensor('float32', [2, 2], [1, 2, 3, 4])), 'add');
    const el = g.scatterElements(g.full([2, 3], 1, 'float32'), g.constant(tensor('int64', [2, 1], [2, 0])), g.constant(tensor('float32', [2, 1], [5, 7])), 1, 'add');
    const picked = g.gatherElements(el, g.constant(tensor('int64', [2, 1], [2, 0])), 1);
    const half = g.input('half', 'float16', [2]);
    g.output('nd', nd);
    g.output('el', el);
    g.output('picked', picked);
    g.output('half_out', g.cast(g.mul(g.cast(half, 'float32'), 2), 'float16'));
    const out = await runOnce(g, { half: tensor('float16', [2], [1.5, -0.25]) });
    expect(toNumbers(out.nd!)).toEqual([0, 0, 4, 6, 0, 0]);
    expect(toNumbers(out.el!)).toEqual([1, 1, 6, 8, 1, 1]);
    expect(toNumbers(out.picked!)).toEqual([6, 8]);
    expect(out.half_out!.dtype).toBe('float16');
    expect(toNumbers(out.half_out!)).toEqual([3, -0.5]);
  });

  it('composites: RMSNorm matches a JS reference and log-softmax via LSE sums to one', async () => {
    const g = new Graph();
    const x = g.input('x', 'float32', [2, 4]);
    g.output('norm', rmsNorm(x, g.constant(tensor('float32', [4], [1, 2, 1, 0.5])), { eps: 1e-6 }));
    g.output('lsm', logSoftmaxLse(x));
    const values = [1, 2, 3, 4, -1, 0.5, 2, -3];
    const out = await runOnce(g, { x: tensor('float32', [2, 4], values) });
    const norm = toNumbers(out.norm!);
    const rms = Math.sqrt((1 + 4 + 9 + 16) / 4 + 1e-6);
    expect(norm[1]).toBeCloseTo((2 / rms) * 2, 5);
    const lsm = toNumbers(out.lsm!);
    expect(lsm.slice(0, 4).reduce((s, v) => s + Math.exp(v), 0)).toBeCloseTo(1, 6);
  });
});

describe('float16 helpers', () => {
  it('round-trips representable values and rounds to nearest even', () => {
    for (const v of [0, 1, -2, 0.5, 65504, 6.103515625e-5, 5.960464477539063e-8]) expect(halfBitsToFloat(floatToHalfBits(v))).toBe(v);
    expect(halfBitsToFloat(floatToHalfBits(1 + 2 ** -11))).toBe(1); // tie -> even
    expect(halfBitsToFloat(floatToHalfBits(1e6))).toBe(Infinity);
  });
});
