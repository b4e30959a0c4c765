import type { Tensor } from './graph-core.ts';
import type { Graph } from './graph.ts';
import type { DifferentiableOp } from './ops.ts';

/**
 * Gradient-check specs, one or more per differentiable op, typed against the
 * same op union as the rule table: a new differentiable op without a case is
 * a compile error, and grad-rules.test.ts checks every case against central
 * finite differences. Float inputs become graph inputs (dtype chosen by the
 * test); int/bool inputs are constants with the given values.
 */
export type GradInput =
  | { readonly shape: readonly number[]; readonly init?: 'normal' | 'positive' | 'nonzero' }
  | { readonly shape: readonly number[]; readonly ints: readonly number[] }
  | { readonly shape: readonly number[]; readonly bools: readonly boolean[] };

export interface GradCase {
  readonly name: string;
  readonly inputs: readonly GradInput[];
  /** Build the op under test from the inputs (in order); the result must have a static shape. */
  readonly build: (g: Graph, x: readonly Tensor[]) => Tensor;
}

const f = (...shape: number[]): GradInput => ({ shape });
const pos = (...shape: number[]): GradInput => ({ shape, init: 'positive' });
const ints = (shape: number[], values: number[]): GradInput => ({ shape, ints: values });

/** x[i] with a friendly failure instead of `!`. */
function at(x: readonly Tensor[], i: number): Tensor {
  const t = x[i];
  if (!t) throw new Error(`grad case: missing input ${i}`);
  return t;
}

const unary = (op: (g: Graph, t: Tensor) => Tensor, input: GradInput = f(2, 3)): readonly GradCase[] => [{ name: 'elementwise', inputs: [input], build: (g, x) => op(g, at(x, 0)) }];

export const GRAD_CASES: { readonly [K in DifferentiableOp]: readonly GradCase[] } = {
  Add: [
    { name: 'broadcast row', inputs: [f(2, 3), f(3)], build: (g, x) => g.add(at(x, 0), at(x, 1)) },
    { name: 'broadcast both ways', inputs: [f(2, 1), f(1, 3)], build: (g, x) => g.add(at(x, 0), at(x, 1)) },
  ],
  Sub: [{ name: 'broadcast column', inputs: [f(2, 3), f(2, 1)], build: (g, x) => g.sub(at(x, 0), at(x, 1)) }],
  Mul: [
    { name: 'broadcast row', inputs: [f(2, 3), f(3)], build: (g, x) => g.mul(at(x, 0), at(x, 1)) },
    { name: 'same tensor twice', inputs: [f(2, 3)], build: (g, x) => g.mul(at(x, 0), at(x, 0)) },
  ],
  Div: [{ name: 'broadcast denominator', inputs: [f(2, 3), pos(3)], build: (g, x) => g.div(at(x, 0), at(x, 1)) }],
  Pow: [{ name: 'both inputs', inputs: [pos(2, 3), f(2, 3)], build: (g, x) => g.pow(at(x, 0), at(x, 1)) }],
  Neg: unary((g, t) => g.neg(t)),
  Abs: unary((g, t) => g.abs(t), { shape: [2, 3], init: 'nonzero' }),
  Exp: unary((g, t) => g.exp(t)),
  Log: unary((g, t) => g.log(t), pos(2, 3)),
  Sqrt: unary((g, t) => g.sqrt(t), pos(2, 3)),
  Reciprocal: unary((g, t) => g.reciprocal(t), pos(2, 3)),
  Sigmoid: unary((g, t) => g.sigmoid(t)),
  Tanh: unary((g, t) => g.tanh(t)),
  Sin: unary((g, t) => g.sin(t)),
  Cos: unary((g, t) => g.cos(t)),
  Identity: unary((g, t) => g.identity(t)),
  // float64 and back: exact in both test dtypes, exercises the rule in both directions.
  Cast: unary((g, t) => g.cast(g.mul(g.cast(t, 'float64'), 2), t.dtype)),
  MatMul: [
    { name: 'batch broadcast on A', inputs: [f(2, 3, 4), f(4, 5)], build: (g, x) => g.matMul(at(x, 0), at(x, 1)) },
    { name: 'batch broadcast on B', inputs: [f(3, 4), f(2, 4, 2)], build: (g, x) => g.matMul(at(x, 0), at(x, 1)) },
  ],
  Gemm: [
    { name: 'plain, C broadcast', inputs: [f(3, 4), f(4, 5), f(5)], build: (g, x) => g.gemm(at(x, 0), at(x, 1), at(x, 2), { alpha: 0.7, beta: 1.3 }) },
    { name: 'transA', inputs: [f(4, 3), f(4, 5), f(3, 5)], build: (g, x) => g.gemm(at(x, 0), at(x, 1), at(x, 2), { transA: true }) },
    { name: 'transB', inputs: [f(3, 4), f(5, 4)], build: (g, x) => g.gemm(at(x, 0), at(x, 1), null, { transB: true, alpha: 1.5 }) },
    { name: 'transA+transB', inputs: [f(4, 3), f(5, 4), f(1, 5)], build: (g, x) => g.gemm(at(x, 0), at(x, 1), at(x, 2), { transA: true, transB: true }) },
  ],
  ReduceSum: [
    { name: 'one axis', inputs: [f(2, 3, 4)], build: (g, x) => g.reduceSum(at(x, 0), [1]) },
    { name: 'two axes keepdims', inputs: [f(2, 3, 4)], build: (g, x) => g.reduceSum(at(x, 0), [0, 2], { keepDims: true }) },
  ],
  ReduceMean: [
    { name: 'last axis', inputs: [f(2, 3, 4)], build: (g, x) => g.reduceMean(at(x, 0), [-1]) },
    { name: 'two axes keepdims', inputs: [f(2, 3, 4)], build: (g, x) => g.reduceMean(at(x, 0), [0, 1], { keepDims: true }) },
  ],
  ReduceMax: [{ name: 'last axis', inputs: [f(2, 3, 4)], build: (g, x) => g.reduceMax(at(x, 0), [2]) }],
  ReduceLogSumExp: [{ name: 'two axes', inputs: [f(2, 3, 4)], build: (g, x) => g.reduceLogSumExp(at(x, 0), [1, 2]) }],
  Softmax: [
    { name: 'last axis', inputs: [f(2, 5)], build: (g, x) => g.softmax(at(x, 0), -1) },
    { name: 'middle axis', inputs: [f(3, 4, 2)], build: (g, x) => g.softmax(at(x, 0), 1) },
  ],
  LogSoftmax: [{ name: 'last axis', inputs: [f(2, 5)], build: (g, x) => g.logSoftmax(at(x, 0), -1) }],
  CumSum: [
    { name: 'forward', inputs: [f(2, 4)], build: (g, x) => g.cumSum(at(x, 0), 1) },
    { name: 'exclusive reverse', inputs: [f(3, 2)], build: (g, x) => g.cumSum(at(x, 0), 0, { exclusive: true, reverse: true }) },
  ],
  Gather: [
    { name: 'embedding rows, repeated index', inputs: [f(5, 3), ints([2, 2], [0, 4, 4, 1])], build: (g, x) => g.gather(at(x, 0), at(x, 1), 0) },
    { name: 'middle axis, negative index', inputs: [f(2, 4, 3), ints([3], [3, -1, 0])], build: (g, x) => g.gather(at(x, 0), at(x, 1), 1) },
  ],
  GatherElements: [{ name: 'pick per row', inputs: [f(3, 4), ints([3, 2], [0, 3, 2, 2, 1, 0])], build: (g, x) => g.gatherElements(at(x, 0), at(x, 1), 1) }],
  GatherND: [
    { name: 'elements', inputs: [f(3, 4), ints([2, 2], [0, 1, 2, 3])], build: (g, x) => g.gatherND(at(x, 0), at(x, 1)) },
    { name: 'rows', inputs: [f(3, 4), ints([2, 1], [2, 0])], build: (g, x) => g.gatherND(at(x, 0), at(x, 1)) },
  ],
  ScatterElements: [
    { name: 'overwrite', inputs: [f(3, 4), ints([3, 2], [0, 3, 2, 1, 1, 0]), f(3, 2)], build: (g, x) => g.scatterElements(at(x, 0), at(x, 1), at(x, 2), 1, 'none') },
    { name: 'add with repeats', inputs: [f(3, 4), ints([3, 2], [0, 0, 2, 1, 3, 3]), f(3, 2)], build: (g, x) => g.scatterElements(at(x, 0), at(x, 1), at(x, 2), 1, 'add') },
  ],
  ScatterND: [
    { name: 'overwrite rows', inputs: [f(4, 3), ints([2, 1], [1, 3]), f(2, 3)], build: (g, x) => g.scatterND(at(x, 0), at(x, 1), at(x, 2), 'none') },
    { name: 'add rows with repeats', inputs: [f(4, 3), ints([2, 1], [2, 2]), f(2, 3)], build: (g, x) => g.scatterND(at(x, 0), at(x, 1), at(x, 2), 'add') },
  ],
  TopK: [{ name: 'values of top 3', inputs: [f(2, 5)], build: (g, x) => g.topK(at(x, 0), 3).values }],
  Reshape: [
    { name: 'static', inputs: [f(2, 6)], build: (g, x) => g.reshape(at(x, 0), [3, 4]) },
    { name: 'inferred dim', inputs: [f(2, 3, 4)], build: (g, x) => g.reshape(at(x, 0), [-1, 4]) },
  ],
  Transpose: [{ name: 'rotate axes', inputs: [f(2, 3, 4)], build: (g, x) => g.transpose(at(x, 0), [2, 0, 1]) }],
  Expand: [{ name: 'new and size-1 axes', inputs: [f(3, 1)], build: (g, x) => g.expand(at(x, 0), [2, 3, 4]) }],
  Concat: [{ name: 'three pieces', inputs: [f(2, 3), f(2, 1), f(2, 2)], build: (g, x) => g.concat([at(x, 0), at(x, 1), at(x, 2)], 1) }],
  Slice: [
    { name: 'middle', inputs: [f(4, 5)], build: (g, x) => g.slice(at(x, 0), { axis: 1, start: 1, end: 4 }) },
    { name: 'negative step', inputs: [f(4, 5)], build: (g, x) => g.slice(at(x, 0), { axis: 1, start: -1, end: 0, step: -2 }) },
    { name: 'two axes, open end', inputs: [f(4, 5)], build: (g, x) => g.slice(at(x, 0), [{ axis: 0, start: 2, end: Infinity }, { axis: -1, start: 0, end: 3, step: 2 }]) },
  ],
  Squeeze: [{ name: 'middle axis', inputs: [f(2, 1, 3)], build: (g, x) => g.squeeze(at(x, 0), [1]) }],
  Unsqueeze: [{ name: 'two axes', inputs: [f(2, 3)], build: (g, x) => g.unsqueeze(at(x, 0), [0, 2]) }],
  Where: [
    {
      name: 'broadcast else branch',
      inputs: [{ shape: [2, 3], bools: [true, false, true, false, false, true] }, f(2, 3), f(3)],
      build: (g, x) => g.where(at(x, 0), at(x, 1), at(x, 2)),
    },
  ],
  Trilu: [
    { name: 'upper', inputs: [f(3, 4)], build: (g, x) => g.trilu(at(x, 0)) },
    { name: 'lower below diagonal', inputs: [f(3, 4)], build: (g, x) => g.trilu(at(x, 0), { upper: false, k: -1 }) },
  ],
};
