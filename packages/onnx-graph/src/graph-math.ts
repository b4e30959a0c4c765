import { isFloatDType, ONNX_DTYPE_CODE, type DType } from './dtype.ts';
import { attr, GraphCore, type Attrs, type Tensor } from './graph-core.ts';
import type { OpType } from './ops.ts';
import { broadcastShapes, formatShape, graphError, normalizeAxis, type Dim } from './shape.ts';

/** A tensor, or a JS number that becomes a scalar constant of the other operand's dtype. */
export type Operand = Tensor | number;

type BinaryOp = 'Add' | 'Sub' | 'Mul' | 'Div' | 'Pow';
type CompareOp = 'Equal' | 'Less' | 'Greater';
type UnaryFloatOp = 'Neg' | 'Abs' | 'Exp' | 'Log' | 'Sqrt' | 'Reciprocal' | 'Sigmoid' | 'Tanh' | 'Sin' | 'Cos' | 'Sign';

export interface ReduceOptions {
  /** Keep reduced axes as size 1 (default false). */
  keepDims?: boolean;
}

export interface GemmOptions {
  /** Scale of A·B (default 1). */
  alpha?: number;
  /** Scale of C (default 1). */
  beta?: number;
  transA?: boolean;
  transB?: boolean;
}

/**
 * Elementwise, linear-algebra and reduction ops with build-time dtype and
 * shape inference. Every method checks its inputs and throws an AppError
 * (code GRAPH) whose message says what was expected and what it got.
 */
export abstract class MathGraph extends GraphCore {
  // ---- elementwise ------------------------------------------------------------------------

  add(a: Operand, b: Operand): Tensor {
    return this.binary('Add', a, b);
  }
  sub(a: Operand, b: Operand): Tensor {
    return this.binary('Sub', a, b);
  }
  mul(a: Operand, b: Operand): Tensor {
    return this.binary('Mul', a, b);
  }
  div(a: Operand, b: Operand): Tensor {
    return this.binary('Div', a, b);
  }
  pow(a: Operand, b: Operand): Tensor {
    return this.binary('Pow', a, b);
  }
  equal(a: Operand, b: Operand): Tensor {
    return this.compare('Equal', a, b);
  }
  less(a: Operand, b: Operand): Tensor {
    return this.compare('Less', a, b);
  }
  greater(a: Operand, b: Operand): Tensor {
    return this.compare('Greater', a, b);
  }

  neg(x: Tensor): Tensor {
    return this.unary('Neg', x);
  }
  abs(x: Tensor): Tensor {
    return this.unary('Abs', x);
  }
  exp(x: Tensor): Tensor {
    return this.unary('Exp', x);
  }
  log(x: Tensor): Tensor {
    return this.unary('Log', x);
  }
  sqrt(x: Tensor): Tensor {
    return this.unary('Sqrt', x);
  }
  reciprocal(x: Tensor): Tensor {
    return this.unary('Reciprocal', x);
  }
  sigmoid(x: Tensor): Tensor {
    return this.unary('Sigmoid', x);
  }
  tanh(x: Tensor): Tensor {
    return this.unary('Tanh', x);
  }
  sin(x: Tensor): Tensor {
    return this.unary('Sin', x);
  }
  cos(x: Tensor): Tensor {
    return this.unary('Cos', x);
  }
  sign(x: Tensor): Tensor {
    return this.unary('Sign', x);
  }

  identity(x: Tensor): Tensor {
    return this.one('Identity', [x], {}, x.dtype, x.shape);
  }

  not(x: Tensor): Tensor {
    this.expectDType('Not', x, ['bool']);
    return this.one('Not', [x], {}, 'bool', x.shape);
  }
  and(a: Tensor, b: Tensor): Tensor {
    return this.logical('And', a, b);
  }
  or(a: Tensor, b: Tensor): Tensor {
    return this.logical('Or', a, b);
  }

  cast(x: Tensor, to: DType): Tensor {
    return this.one('Cast', [x], { to: attr.int(ONNX_DTYPE_CODE[to]) }, to, x.shape);
  }

  /** Select `a` where `cond` is true, else `b` (three-way broadcasting). */
  where(cond: Tensor, a: Operand, b: Operand): Tensor {
    this.expectDType('Where', cond, ['bool']);
    const [ta, tb] = this.operands('Where', a, b);
    const shape = broadcastShapes(broadcastShapes(cond.shape, ta.shape, 'Where'), tb.shape, 'Where');
    return this.one('Where', [cond, ta, tb], {}, ta.dtype, shape);
  }

  // ---- linear algebra ---------------------------------------------------------------------

  /** Batched matrix product [..., M, K] x [..., K, N] -> [..., M, N]; batch dims broadcast. */
  matMul(a: Tensor, b: Tensor): Tensor {
    this.sameDType('MatMul', a, b);
    if (a.rank < 2 || b.rank < 2) throw graphError(`MatMul: expected inputs of rank >= 2, got ${a.toString()} and ${b.toString()}`);
    const k1 = a.shape[a.rank - 1] as Dim;
    const k2 = b.shape[b.rank - 2] as Dim;
    if (k1 !== k2) throw graphError(`MatMul: inner dims must match: expected ${String(k1)} (last dim of ${a.toString()}), got ${String(k2)} (dim -2 of ${b.toString()})`);
    const batch = broadcastShapes(a.shape.slice(0, -2), b.shape.slice(0, -2), 'MatMul (batch dims)');
    return this.one('MatMul', [a, b], {}, a.dtype, [...batch, a.shape[a.rank - 2] as Dim, b.shape[b.rank - 1] as Dim]);
  }

  /** alpha·op(A)·op(B) + beta·C for 2-D A, B; C broadcasts to [M, N]. */
  gemm(a: Tensor, b: Tensor, c: Tensor | null, options: GemmOptions = {}): Tensor {
    this.sameDType('Gemm', a, b);
    if (a.rank !== 2 || b.rank !== 2) throw graphError(`Gemm: expected 2-D A and B, got ${a.toString()} and ${b.toString()}`);
    const [m, k1] = options.transA ? [a.shape[1], a.shape[0]] : [a.shape[0], a.shape[1]];
    const [k2, n] = options.transB ? [b.shape[1], b.shape[0]] : [b.shape[0], b.shape[1]];
    if (k1 !== k2) throw graphError(`Gemm: inner dims must match: expected ${String(k1)}, got ${String(k2)}`);
    const out = [m as Dim, n as Dim];
    if (c) {
      this.sameDType('Gemm', a, c);
      broadcastShapes(c.shape, out, 'Gemm (C)');
      if (c.rank > 2) throw graphError(`Gemm: expected C of rank <= 2, got ${c.toString()}`);
    }
    const attrs = {
      alpha: attr.float(options.alpha ?? 1),
      beta: attr.float(options.beta ?? 1),
      transA: attr.int(options.transA ? 1 : 0),
      transB: attr.int(options.transB ? 1 : 0),
    };
    return this.one('Gemm', c ? [a, b, c] : [a, b], attrs, a.dtype, out);
  }

  // ---- reductions -------------------------------------------------------------------------

  /** Sum over `axes` (default: all). */
  reduceSum(x: Tensor, axes?: readonly number[], options: ReduceOptions = {}): Tensor {
    return this.reduce('ReduceSum', x, axes, options);
  }
  reduceMean(x: Tensor, axes?: readonly number[], options: ReduceOptions = {}): Tensor {
    return this.reduce('ReduceMean', x, axes, options);
  }
  reduceMax(x: Tensor, axes?: readonly number[], options: ReduceOptions = {}): Tensor {
    return this.reduce('ReduceMax', x, axes, options);
  }
  /** log(sum(exp(x))) over axes, computed stably by the runtime. */
  reduceLogSumExp(x: Tensor, axes?: readonly number[], options: ReduceOptions = {}): Tensor {
    return this.reduce('ReduceLogSumExp', x, axes, options);
  }

  softmax(x: Tensor, axis = -1): Tensor {
    this.expectFloat('Softmax', x);
    return this.one('Softmax', [x], { axis: attr.int(normalizeAxis(axis, x.rank, 'Softmax')) }, x.dtype, x.shape);
  }

  /** Native LogSoftmax (see `logSoftmaxLse` in composites for the WebGPU-friendly form). */
  logSoftmax(x: Tensor, axis = -1): Tensor {
    this.expectFloat('LogSoftmax', x);
    return this.one('LogSoftmax', [x], { axis: attr.int(normalizeAxis(axis, x.rank, 'LogSoftmax')) }, x.dtype, x.shape);
  }

  /** Cumulative sum along `axis` (exclusive: shift by one; reverse: from the end). */
  cumSum(x: Tensor, axis: number, options: { exclusive?: boolean; reverse?: boolean } = {}): Tensor {
    const ax = normalizeAxis(axis, x.rank, 'CumSum');
    const attrs = { exclusive: attr.int(options.exclusive ? 1 : 0), reverse: attr.int(options.reverse ? 1 : 0) };
    return this.one('CumSum', [x, this.constantInt64Scalar(ax)], attrs, x.dtype, x.shape);
  }

  /** Keep the upper (default) or lower triangle of the last two dims, offset by diagonal `k`. */
  trilu(x: Tensor, options: { upper?: boolean; k?: number } = {}): Tensor {
    if (x.rank < 2) throw graphError(`Trilu: expected rank >= 2, got ${x.toString()}`);
    const k = options.k ?? 0;
    const inputs = k === 0 ? [x] : [x, this.constantInt64Scalar(k)];
    return this.one('Trilu', inputs, { upper: attr.int(options.upper === false ? 0 : 1) }, x.dtype, x.shape);
  }

  // ---- helpers shared with graph.ts ---------------------------------------------------------

  protected constantInt64Scalar(v: number): Tensor {
    return this.scalar(v, 'int64');
  }

  /** Add a single-output node. */
  protected one(op: OpType, inputs: readonly (Tensor | null)[], attrs: Attrs, dtype: DType, shape: readonly Dim[]): Tensor {
    const [t] = this.addNode(op, inputs, attrs, [{ dtype, shape }]);
    if (!t) throw graphError(`${op}: produced no output`);
    return t;
  }

  protected operands(op: string, a: Operand, b: Operand): [Tensor, Tensor] {
    if (typeof a === 'number' && typeof b === 'number') throw graphError(`${op}: expected at least one tensor operand, got two numbers`);
    const ta = typeof a === 'number' ? this.scalar(a, (b as Tensor).dtype) : a;
    const tb = typeof b === 'number' ? this.scalar(b, ta.dtype) : b;
    this.sameDType(op, ta, tb);
    return [ta, tb];
  }

  protected sameDType(op: string, a: Tensor, b: Tensor): void {
    if (a.dtype !== b.dtype) throw graphError(`${op}: dtypes must match: expected ${a.dtype} (from ${a.toString()}), got ${b.dtype} (from ${b.toString()})`);
  }

  protected expectDType(op: string, x: Tensor, allowed: readonly DType[]): void {
    if (!allowed.includes(x.dtype)) throw graphError(`${op}: expected ${allowed.join(' | ')}, got ${x.dtype} (${x.toString()})`);
  }

  protected expectFloat(op: string, x: Tensor): void {
    if (!isFloatDType(x.dtype)) throw graphError(`${op}: expected a float tensor (float32 | float64 | float16), got ${x.dtype} (${x.toString()})`);
  }

  protected expectIndices(op: string, x: Tensor): void {
    if (x.dtype !== 'int64' && x.dtype !== 'int32') throw graphError(`${op}: expected int64 | int32 indices, got ${x.dtype} (${x.toString()})`);
  }

  private binary(op: BinaryOp, a: Operand, b: Operand): Tensor {
    const [ta, tb] = this.operands(op, a, b);
    if (ta.dtype === 'bool') throw graphError(`${op}: expected numeric tensors, got bool (${ta.toString()})`);
    return this.one(op, [ta, tb], {}, ta.dtype, broadcastShapes(ta.shape, tb.shape, op));
  }

  private compare(op: CompareOp, a: Operand, b: Operand): Tensor {
    const [ta, tb] = this.operands(op, a, b);
    return this.one(op, [ta, tb], {}, 'bool', broadcastShapes(ta.shape, tb.shape, op));
  }

  private logical(op: 'And' | 'Or', a: Tensor, b: Tensor): Tensor {
    this.expectDType(op, a, ['bool']);
    this.expectDType(op, b, ['bool']);
    return this.one(op, [a, b], {}, 'bool', broadcastShapes(a.shape, b.shape, op));
  }

  private unary(op: UnaryFloatOp, x: Tensor): Tensor {
    if (op === 'Neg' || op === 'Abs' || op === 'Sign') {
      if (x.dtype === 'bool') throw graphError(`${op}: expected a numeric tensor, got bool (${x.toString()})`);
    } else this.expectFloat(op, x);
    return this.one(op, [x], {}, x.dtype, x.shape);
  }

  private reduce(op: 'ReduceSum' | 'ReduceMean' | 'ReduceMax' | 'ReduceLogSumExp', x: Tensor, axes: readonly number[] | undefined, options: ReduceOptions): Tensor {
    if (x.dtype === 'bool') throw graphError(`${op}: expected a numeric tensor, got bool (${x.toString()})`);
    const norm = (axes ?? x.shape.map((_, i) => i)).map((a) => normalizeAxis(a, x.rank, op));
    if (new Set(norm).size !== norm.length) throw graphError(`${op}: expected distinct axes, got [${(axes ?? []).join(', ')}]`);
    const keep = options.keepDims === true;
    const shape = keep ? x.shape.map((d, i) => (norm.includes(i) ? 1 : d)) : x.shape.filter((_, i) => !norm.includes(i));
    const sorted = [...norm].sort((p, q) => p - q);
    // Opset 17: ReduceSum takes axes as an input (since 13); the others still take an attribute (until 18).
    if (op === 'ReduceSum') return this.one(op, [x, this.ints(sorted)], { keepdims: attr.int(keep ? 1 : 0) }, x.dtype, shape);
    return this.one(op, [x], { axes: attr.ints(sorted), keepdims: attr.int(keep ? 1 : 0) }, x.dtype, shape);
  }

  protected checkShapeLength(op: string, what: string, got: readonly unknown[], expected: number): void {
    if (got.length !== expected) throw graphError(`${op}: ${what}: expected ${expected} entries, got ${got.length} ([${got.join(', ')}])`);
  }

  protected describeShape(x: Tensor): string {
    return formatShape(x.shape);
  }
}
