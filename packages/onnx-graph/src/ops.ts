/**
 * The closed set of ONNX ops the builder emits (default domain, opset 17),
 * each declared differentiable or not. The gradient rule table in
 * grad-rules.ts is typed `{ [K in DifferentiableOp]: GradRule }`, so adding a
 * differentiable op here without a rule is a compile error; ops declared
 * 'none' have no gradient and backprop through them fails with a GRAPH error.
 */
export const OP_GRADIENT = {
  // elementwise arithmetic (broadcasting)
  Add: 'differentiable',
  Sub: 'differentiable',
  Mul: 'differentiable',
  Div: 'differentiable',
  Pow: 'differentiable',
  // elementwise unary
  Neg: 'differentiable',
  Abs: 'differentiable',
  Exp: 'differentiable',
  Log: 'differentiable',
  Sqrt: 'differentiable',
  Reciprocal: 'differentiable',
  Sigmoid: 'differentiable',
  Tanh: 'differentiable',
  Sin: 'differentiable',
  Cos: 'differentiable',
  Identity: 'differentiable',
  Cast: 'differentiable',
  // linear algebra
  MatMul: 'differentiable',
  Gemm: 'differentiable',
  // reductions and normalisers
  ReduceSum: 'differentiable',
  ReduceMean: 'differentiable',
  ReduceMax: 'differentiable',
  ReduceLogSumExp: 'differentiable',
  Softmax: 'differentiable',
  LogSoftmax: 'differentiable',
  CumSum: 'differentiable',
  // indexing
  Gather: 'differentiable',
  GatherElements: 'differentiable',
  GatherND: 'differentiable',
  ScatterElements: 'differentiable',
  ScatterND: 'differentiable',
  TopK: 'differentiable',
  // layout
  Reshape: 'differentiable',
  Transpose: 'differentiable',
  Expand: 'differentiable',
  Concat: 'differentiable',
  Slice: 'differentiable',
  Squeeze: 'differentiable',
  Unsqueeze: 'differentiable',
  Where: 'differentiable',
  Trilu: 'differentiable',
  // no gradient: constants, shapes, indices, comparisons, randomness, control flow
  Constant: 'none',
  ConstantOfShape: 'none',
  Shape: 'none',
  Size: 'none',
  Range: 'none',
  Equal: 'none',
  Less: 'none',
  Greater: 'none',
  Not: 'none',
  And: 'none',
  Or: 'none',
  Sign: 'none',
  ArgMax: 'none',
  RandomUniformLike: 'none',
  Loop: 'none',
  If: 'none',
} as const satisfies Record<string, 'differentiable' | 'none'>;

export type OpType = keyof typeof OP_GRADIENT;
export type DifferentiableOp = { [K in OpType]: (typeof OP_GRADIENT)[K] extends 'differentiable' ? K : never }[OpType];
export type NonDifferentiableOp = Exclude<OpType, DifferentiableOp>;

export function isDifferentiableOp(op: OpType): op is DifferentiableOp {
  return OP_GRADIENT[op] === 'differentiable';
}

/** The opset this package emits; pinned (17: widest runtime support incl. WebGPU, Shape(start,end), ScatterND add). */
export const OPSET = 17;
/** IR version that goes with opset 17 (onnx/docs/Versioning.md). */
export const IR_VERSION = 8;
