/**
 * The closed set of ONNX ops the builder emits (default domain, opset 17),
 * each declared with its gradient behaviour:
 * - 'differentiable': has an entry in the rule table (grad-rules.ts), which is
 *   typed `{ [K in DifferentiableOp]: GradRule }`, so a missing rule is a compile error;
 * - 'zero': the output does not vary smoothly with any float input (shapes,
 *   indices, comparisons, random draws): gradients stop here, contributing zero;
 * - 'unsupported': a gradient exists in principle but is not implemented
 *   (control flow): backprop through it throws a GRAPH error instead of
 *   silently dropping a dependency.
 */
export type GradientKind = 'differentiable' | 'zero' | 'unsupported';

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
  // zero gradient: constants, shapes, indices, comparisons, randomness
  Constant: 'zero',
  ConstantOfShape: 'zero',
  Shape: 'zero',
  Size: 'zero',
  Range: 'zero',
  Equal: 'zero',
  Less: 'zero',
  Greater: 'zero',
  Not: 'zero',
  And: 'zero',
  Or: 'zero',
  Sign: 'zero',
  ArgMax: 'zero',
  RandomUniformLike: 'zero',
  // not differentiated: control flow (the loss must not depend on float Loop/If outputs)
  Loop: 'unsupported',
  If: 'unsupported',
} as const satisfies Record<string, GradientKind>;

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
