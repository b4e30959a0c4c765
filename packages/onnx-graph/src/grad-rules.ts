import { isFloatDType } from './dtype.ts';
import type { AttrValue, GraphNode, Tensor } from './graph-core.ts';
import type { Graph } from './graph.ts';
import type { DifferentiableOp } from './ops.ts';
import { graphError, inversePermutation, type Dim } from './shape.ts';
import { toNumbers } from './tensor-data.ts';

/** What a rule sees: the node, its inputs x and outputs y, and the gradients flowing into the outputs. */
export interface GradContext {
  readonly g: Graph;
  readonly node: GraphNode;
  readonly x: readonly (Tensor | null)[];
  readonly y: readonly Tensor[];
  /** Gradient of the first output (zeros if only other outputs received gradients). */
  readonly dy: Tensor;
  readonly dys: readonly (Tensor | null)[];
  /** Whether each input needs a gradient (depends on a `wrt` tensor and is float). */
  readonly needs: readonly boolean[];
}

/**
 * One gradient per input (null: none). A gradient may have the broadcast shape of the
 * output; the engine (autodiff.ts) sums it back to the input's shape.
 */
export type GradRule = (ctx: GradContext) => readonly (Tensor | null)[];

// ---- small helpers the rules share ----------------------------------------------------------

function input(ctx: GradContext, i: number): Tensor {
  const t = ctx.x[i];
  if (!t) throw graphError(`gradient of ${ctx.node.opType}: expected input ${i}, got none`);
  return t;
}

function attrOf(node: GraphNode, name: string): AttrValue | undefined {
  return node.attrs[name];
}

function intAttr(node: GraphNode, name: string, fallback: number): number {
  const a = attrOf(node, name);
  return a && a.kind === 'int' ? a.value : fallback;
}

function intsAttr(node: GraphNode, name: string): readonly number[] {
  const a = attrOf(node, name);
  if (a && a.kind === 'ints') return a.value;
  throw graphError(`gradient of ${node.opType}: expected attribute '${name}', got none`);
}

/** Values of a constant int input (axes, k, ...): rules need them at build time. */
function constInts(t: Tensor | null | undefined, what: string): number[] {
  if (!t?.constValue) throw graphError(`gradient: expected ${what} to be a constant, got ${t ? t.toString() : 'none'}`);
  return toNumbers(t.constValue);
}

/** Swap the last two axes. */
function swapLast(g: Graph, t: Tensor): Tensor {
  const perm = t.shape.map((_, i) => i);
  perm[t.rank - 1] = t.rank - 2;
  perm[t.rank - 2] = t.rank - 1;
  return g.transpose(t, perm);
}

/** A reduced gradient brought back to rank: re-insert reduced axes unless keepdims was set. */
function keepReduced(g: Graph, t: Tensor, axes: readonly number[], keepDims: boolean): Tensor {
  return keepDims ? t : g.unsqueeze(t, axes);
}

/** Reduce-op gradient: the output gradient spread over the reduced axes, shaped like x. */
function spread(ctx: GradContext, axes: readonly number[]): Tensor {
  const { g, node, dy } = ctx;
  return g.expandAs(keepReduced(g, dy, axes, intAttr(node, 'keepdims', 1) === 1), input(ctx, 0));
}

/** 1 / (number of elements reduced): static when the reduced dims are, else from run-time sizes. */
function meanScale(ctx: GradContext, axes: readonly number[]): Tensor | number {
  const x = input(ctx, 0);
  const dims = axes.map((a) => x.shape[a] as Dim);
  if (dims.every((d) => typeof d === 'number')) return 1 / dims.reduce((p, d) => p * (d as number), 1);
  const { g } = ctx;
  return g.div(g.cast(g.size(ctx.y[0] as Tensor), x.dtype), g.cast(g.size(x), x.dtype));
}

/** Indices made non-negative (Gather accepts negative indices, ScatterND does not). */
function nonNegative(g: Graph, idx: Tensor, data: Tensor, axis: number): Tensor {
  const i64 = idx.dtype === 'int64' ? idx : g.cast(idx, 'int64');
  const dim = g.reshape(g.shape(data, axis, axis + 1), []);
  return g.where(g.less(i64, 0), g.add(i64, dim), i64);
}

// ---- the table: one entry per differentiable op ----------------------------------------------

/** Every gradient rule. Derivatives as in any calculus table; sources cited where not textbook. */
export const GRAD_RULES: { readonly [K in DifferentiableOp]: GradRule } = {
  Add: ({ dy }) => [dy, dy],
  Sub: ({ g, dy, needs }) => [dy, needs[1] ? g.neg(dy) : null],
  Mul: (c) => [c.needs[0] ? c.g.mul(c.dy, input(c, 1)) : null, c.needs[1] ? c.g.mul(c.dy, input(c, 0)) : null],
  // d(a/b) = da/b − (a/b²) db = da/b − y·db/b
  Div: (c) => {
    const da = c.g.div(c.dy, input(c, 1));
    return [da, c.needs[1] ? c.g.neg(c.g.mul(da, c.y[0] as Tensor)) : null];
  },
  // d(a^b) = b·a^(b−1) da + a^b·ln(a) db
  Pow: (c) => {
    const { g, dy } = c;
    const [a, b] = [input(c, 0), input(c, 1)];
    return [c.needs[0] ? g.mul(dy, g.mul(b, g.pow(a, g.sub(b, 1)))) : null, c.needs[1] ? g.mul(dy, g.mul(c.y[0] as Tensor, g.log(a))) : null];
  },
  Neg: ({ g, dy }) => [g.neg(dy)],
  Abs: (c) => [c.g.mul(c.dy, c.g.sign(input(c, 0)))],
  Exp: ({ g, dy, y }) => [g.mul(dy, y[0] as Tensor)],
  Log: (c) => [c.g.div(c.dy, input(c, 0))],
  Sqrt: ({ g, dy, y }) => [g.div(g.mul(dy, 0.5), y[0] as Tensor)],
  Reciprocal: ({ g, dy, y }) => [g.neg(g.mul(dy, g.mul(y[0] as Tensor, y[0] as Tensor)))],
  Sigmoid: ({ g, dy, y }) => [g.mul(dy, g.mul(y[0] as Tensor, g.sub(1, y[0] as Tensor)))],
  Tanh: ({ g, dy, y }) => [g.mul(dy, g.sub(1, g.mul(y[0] as Tensor, y[0] as Tensor)))],
  Sin: (c) => [c.g.mul(c.dy, c.g.cos(input(c, 0)))],
  Cos: (c) => [c.g.neg(c.g.mul(c.dy, c.g.sin(input(c, 0))))],
  Identity: ({ dy }) => [dy],
  Cast: (c) => [isFloatDType(input(c, 0).dtype) ? c.g.cast(c.dy, input(c, 0).dtype) : null],

  // C = A·B: dA = dC·Bᵀ, dB = Aᵀ·dC (batch dims broadcast; the engine sums them back).
  MatMul: (c) => {
    const { g, dy } = c;
    const [a, b] = [input(c, 0), input(c, 1)];
    const da = c.needs[0] ? g.matMul(dy, swapLast(g, b)) : null;
    if (!c.needs[1]) return [da, null];
    // A 2-D B shared by every batch (a weight): Σ_batch Aᵀ·dC is one GEMM over the flattened
    // batch, (K, B·M)·(B·M, N), instead of B small GEMMs plus a ReduceSum. Same sum, same shape.
    if (b.rank === 2 && a.rank > 2) return [da, g.matMul(g.transpose(g.reshape(a, [-1, a.shape[a.rank - 1] as Dim])), g.reshape(dy, [-1, dy.shape[dy.rank - 1] as Dim]))];
    return [da, g.matMul(swapLast(g, a), dy)];
  },
  // Y = α·op(A)·op(B) + β·C, written back as Gemms with the transposes folded in.
  Gemm: (c) => {
    const { g, node, dy } = c;
    const [a, b] = [input(c, 0), input(c, 1)];
    const alphaAttr = node.attrs.alpha;
    const betaAttr = node.attrs.beta;
    const alpha = alphaAttr?.kind === 'float' ? alphaAttr.value : 1;
    const beta = betaAttr?.kind === 'float' ? betaAttr.value : 1;
    const ta = intAttr(node, 'transA', 0) === 1;
    const tb = intAttr(node, 'transB', 0) === 1;
    const da = (): Tensor => (ta ? g.gemm(b, dy, null, { alpha, transA: tb, transB: true }) : g.gemm(dy, b, null, { alpha, transB: !tb }));
    const db = (): Tensor => (tb ? g.gemm(dy, a, null, { alpha, transA: true, transB: ta }) : g.gemm(a, dy, null, { alpha, transA: !ta }));
    return [c.needs[0] ? da() : null, c.needs[1] ? db() : null, c.needs[2] ? g.mul(dy, beta) : null];
  },

  ReduceSum: (c) => [spread(c, constInts(c.x[1], 'ReduceSum axes')), null],
  ReduceMean: (c) => {
    const axes = intsAttr(c.node, 'axes');
    return [c.g.mul(spread(c, axes), meanScale(c, axes))];
  },
  // Subgradient of max: split evenly between tied maxima (as torch.amax does).
  ReduceMax: (c) => {
    const { g, node } = c;
    const x = input(c, 0);
    const axes = intsAttr(node, 'axes');
    const yk = keepReduced(g, c.y[0] as Tensor, axes, intAttr(node, 'keepdims', 1) === 1);
    const mask = g.cast(g.equal(x, yk), x.dtype);
    const share = g.div(mask, g.reduceSum(mask, axes, { keepDims: true }));
    return [g.mul(spread(c, axes), share)];
  },
  // d logsumexp(x) = softmax(x) = exp(x − y)
  ReduceLogSumExp: (c) => {
    const { g, node } = c;
    const axes = intsAttr(node, 'axes');
    const yk = keepReduced(g, c.y[0] as Tensor, axes, intAttr(node, 'keepdims', 1) === 1);
    return [g.mul(spread(c, axes), g.exp(g.sub(input(c, 0), yk)))];
  },
  // dx = y ⊙ (dy − Σ dy⊙y) over the softmax axis
  Softmax: ({ g, node, dy, y }) => {
    const axis = intAttr(node, 'axis', -1);
    const s = y[0] as Tensor;
    return [g.mul(s, g.sub(dy, g.reduceSum(g.mul(dy, s), [axis], { keepDims: true })))];
  },
  // dx = dy − exp(y) ⊙ Σ dy
  LogSoftmax: ({ g, node, dy, y }) => {
    const axis = intAttr(node, 'axis', -1);
    return [g.sub(dy, g.mul(g.exp(y[0] as Tensor), g.reduceSum(dy, [axis], { keepDims: true })))];
  },
  // The adjoint of a prefix sum is a suffix sum.
  CumSum: (c) => {
    const axis = constInts(c.x[1], 'CumSum axis')[0] ?? 0;
    return [c.g.cumSum(c.dy, axis, { exclusive: intAttr(c.node, 'exclusive', 0) === 1, reverse: intAttr(c.node, 'reverse', 0) !== 1 }), null];
  },

  // Gather's adjoint scatters-adds rows back: ScatterND on data moved so `axis` leads.
  Gather: (c) => {
    const { g, node, dy } = c;
    const data = input(c, 0);
    const axis = intAttr(node, 'axis', 0);
    const q = input(c, 1).rank;
    const idx = g.unsqueeze(nonNegative(g, input(c, 1), data, axis), [-1]);
    if (axis === 0) return [g.scatterND(g.zerosLike(data), idx, dy, 'add'), null];
    const permData = [axis, ...data.shape.map((_, i) => i).filter((i) => i !== axis)];
    const idxAxes = Array.from({ length: q }, (_, i) => axis + i);
    const permDy = [...idxAxes, ...dy.shape.map((_, i) => i).filter((i) => !idxAxes.includes(i))];
    const scattered = g.scatterND(g.zerosLike(g.transpose(data, permData)), idx, g.transpose(dy, permDy), 'add');
    return [g.transpose(scattered, inversePermutation(permData)), null];
  },
  GatherElements: (c) => [c.g.scatterElements(c.g.zerosLike(input(c, 0)), input(c, 1), c.dy, intAttr(c.node, 'axis', 0), 'add'), null],
  GatherND: (c) => [c.g.scatterND(c.g.zerosLike(input(c, 0)), input(c, 1), c.dy, 'add'), null],
  // data: dy where not overwritten ('none') or everywhere ('add'); updates: dy at their targets.
  ScatterElements: (c) => {
    const { g, node, dy } = c;
    const axis = intAttr(node, 'axis', 0);
    const [idx, upd] = [input(c, 1), input(c, 2)];
    const overwrite = node.attrs.reduction?.kind === 'string' && node.attrs.reduction.value === 'none';
    const dData = (): Tensor => (overwrite ? g.scatterElements(dy, idx, g.zerosLike(upd), axis, 'none') : dy);
    return [c.needs[0] ? dData() : null, null, c.needs[2] ? g.gatherElements(dy, idx, axis) : null];
  },
  ScatterND: (c) => {
    const { g, node, dy } = c;
    const [idx, upd] = [input(c, 1), input(c, 2)];
    const overwrite = node.attrs.reduction?.kind === 'string' && node.attrs.reduction.value === 'none';
    const dData = (): Tensor => (overwrite ? g.scatterND(dy, idx, g.zerosLike(upd), 'none') : dy);
    return [c.needs[0] ? dData() : null, null, c.needs[2] ? g.gatherND(dy, idx) : null];
  },
  // Only the values output is differentiable: route dy back to the selected positions.
  TopK: (c) => {
    const { g, node } = c;
    const dv = c.dys[0];
    if (!dv) return [null, null];
    return [g.scatterElements(g.zerosLike(input(c, 0)), c.y[1] as Tensor, dv, intAttr(node, 'axis', -1), 'add'), null];
  },

  Reshape: (c) => [c.g.reshapeAs(c.dy, input(c, 0)), null],
  Transpose: (c) => [c.g.transpose(c.dy, inversePermutation(intsAttr(c.node, 'perm')))],
  // Expand is broadcasting: the engine's unbroadcast is the whole adjoint.
  Expand: ({ dy }) => [dy, null],
  // Each input gets its stretch of dy along the axis (offsets read at run time when symbolic).
  Concat: (c) => {
    const { g, node, dy } = c;
    const axis = intAttr(node, 'axis', 0);
    const last = c.needs.lastIndexOf(true);
    const asTensor = (v: Tensor | number): Tensor => (typeof v === 'number' ? g.ints([v]) : v);
    let offset: Tensor | number = 0;
    return c.x.map((t, i) => {
      if (!t || i > last) return null;
      const len = t.shape[axis] as Dim;
      const end: Tensor | number = typeof offset === 'number' && typeof len === 'number' ? offset + len : g.add(asTensor(offset), typeof len === 'number' ? g.ints([len]) : g.shape(t, axis, axis + 1));
      const piece = c.needs[i] ? sliceKnown(g, dy, axis, asTensor(offset), asTensor(end), t) : null;
      offset = end;
      return piece;
    });
  },
  // Single-axis Slice (the builder emits one node per axis): scatter dy into zeros at the sliced positions.
  Slice: (c) => {
    const { g, dy } = c;
    const x = input(c, 0);
    const axis = constInts(c.x[3], 'Slice axes')[0] ?? 0;
    const dim = g.reshape(g.shape(x, axis, axis + 1), []);
    const positions = g.addNode('Slice', [g.range(g.scalar(0, 'int64'), dim, g.scalar(1, 'int64')), c.x[1] ?? null, c.x[2] ?? null, g.ints([0]), c.x[4] ?? null], {}, [{ dtype: 'int64', shape: [dy.shape[axis] as Dim] }])[0] as Tensor;
    const ones = x.shape.map((_, i) => (i === axis ? -1 : 1));
    const index = g.expandAs(g.reshape(positions, ones), dy);
    return [g.scatterElements(g.zerosLike(x), index, dy, axis, 'add'), null, null, null, null];
  },
  Squeeze: (c) => [c.g.reshapeAs(c.dy, input(c, 0)), null],
  Unsqueeze: (c) => [c.g.reshapeAs(c.dy, input(c, 0)), null],
  Where: (c) => {
    const { g, dy } = c;
    const cond = input(c, 0);
    return [null, c.needs[1] ? g.where(cond, dy, 0) : null, c.needs[2] ? g.where(cond, 0, dy) : null];
  },
  // Masking is linear and self-adjoint: apply the same mask to dy.
  Trilu: (c) => {
    const k = c.x[1] ? (constInts(c.x[1], 'Trilu k')[0] ?? 0) : 0;
    return [c.g.trilu(c.dy, { upper: intAttr(c.node, 'upper', 1) === 1, k }), null];
  },
};

/** Slice [start, end) of one axis with bounds as tensors, typed with a known output shape. */
function sliceKnown(g: Graph, t: Tensor, axis: number, start: Tensor, end: Tensor, like: Tensor): Tensor {
  return g.addNode('Slice', [t, start, end, g.ints([axis]), g.ints([1])], {}, [{ dtype: t.dtype, shape: like.shape }])[0] as Tensor;
}
