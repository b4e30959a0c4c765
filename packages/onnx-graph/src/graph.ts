import { ONNX_DTYPE_CODE, type DType } from './dtype.ts';
import { attr, type Attrs, type Tensor } from './graph-core.ts';
import { buildIf, buildLoop, type LoopResult, type LoopSpecOf } from './control-flow.ts';
import { MathGraph, type Operand } from './graph-math.ts';
import { broadcastShapes, dimProduct, formatShape, graphError, isStaticShape, normalizeAxis, type Dim, type Shape } from './shape.ts';
import { tensor } from './tensor-data.ts';

/** "To the end" for slice ends (ONNX clamps any large value). */
const SLICE_END = Number.MAX_SAFE_INTEGER;

/** An ONNX Loop built with `Graph.loop`: its body is a Graph. */
export type LoopSpec = LoopSpecOf<Graph>;

export interface SliceSpec {
  axis: number;
  /** First index (negative counts from the end); a number or an int64 tensor of shape [] or [1]. */
  start: number | Tensor;
  /** One past the last index; `Infinity` = to the end. */
  end: number | Tensor;
  /** Default 1. */
  step?: number;
  /**
   * The result's size along `axis`, when the builder cannot infer it (tensor bounds, or a symbolic
   * dim cut at both ends): e.g. a symbolic dim that other tensors already carry, so the result lines up
   * with them instead of getting a fresh unrelated dim. Checked against what can be inferred; at run
   * time it is the caller's promise.
   */
  dim?: Dim;
}


/**
 * The graph builder: inputs, initializers, outputs (GraphCore), elementwise,
 * linear algebra and reductions (MathGraph), plus layout, indexing,
 * generators and control flow here. Build subgraphs for `loop` and `ifElse`
 * with the `Graph` their callback receives.
 */
export class Graph extends MathGraph {
  constructor(parent?: Graph) {
    super(parent);
  }

  // ---- layout ---------------------------------------------------------------------------

  /**
   * Reshape to `shape`: numbers are static, strings are symbolic dims read at run time,
   * -1 is inferred, 0 copies the input dim (ONNX semantics).
   */
  reshape(x: Tensor, shape: Shape): Tensor {
    const inferred = shape.indexOf(-1);
    if (inferred !== shape.lastIndexOf(-1)) throw graphError(`Reshape: expected at most one -1 in ${formatShape(shape)}, got several`);
    const resolved: Dim[] = shape.map((d, i) => {
      if (d !== 0) return d;
      const src = x.shape[i];
      if (src === undefined) throw graphError(`Reshape: 0 at position ${i} copies an input dim, but ${x.toString()} has rank ${x.rank}`);
      return src;
    });
    const total = dimProduct(x.shape);
    if (inferred >= 0) resolved[inferred] = divideDims(total, dimProduct(resolved.filter((_, i) => i !== inferred)), () => this.freshDim('reshape'));
    else if (dimProduct(resolved) !== total) {
      throw graphError(`Reshape: element counts differ: expected ${String(total)} (from ${x.toString()}), got ${String(dimProduct(resolved))} (target ${formatShape(shape)})`);
    }
    const shapeTensor = isStaticShape(shape) ? this.ints(shape) : this.dimsTensor(shape);
    return this.one('Reshape', [x, shapeTensor], {}, x.dtype, resolved);
  }

  /** Reshape `x` to the run-time shape of `like` (used by gradients: no symbolic bookkeeping). */
  reshapeAs(x: Tensor, like: Tensor): Tensor {
    return this.one('Reshape', [x, this.shape(like)], {}, x.dtype, like.shape);
  }

  /** Permute axes (default: reverse them). */
  transpose(x: Tensor, perm?: readonly number[]): Tensor {
    const p = perm ?? x.shape.map((_, i) => x.rank - 1 - i);
    const sorted = [...p].sort((a, b) => a - b);
    if (p.length !== x.rank || sorted.some((v, i) => v !== i)) throw graphError(`Transpose: expected a permutation of 0..${x.rank - 1}, got [${p.join(', ')}]`);
    return this.one('Transpose', [x], { perm: attr.ints(p) }, x.dtype, p.map((i) => x.shape[i] as Dim));
  }

  /** Broadcast `x` to `shape` (numpy rules; the result has the broadcast of both shapes). */
  expand(x: Tensor, shape: Shape): Tensor {
    return this.one('Expand', [x, this.dimsTensor(shape)], {}, x.dtype, broadcastShapes(x.shape, shape, 'Expand'));
  }

  /** Broadcast `x` to the run-time shape of `like`. */
  expandAs(x: Tensor, like: Tensor): Tensor {
    return this.one('Expand', [x, this.shape(like)], {}, x.dtype, broadcastShapes(x.shape, like.shape, 'Expand'));
  }

  concat(xs: readonly Tensor[], axis: number): Tensor {
    const first = xs[0];
    if (!first) throw graphError('Concat: expected at least one input, got none');
    const ax = normalizeAxis(axis, first.rank, 'Concat');
    for (const t of xs) {
      this.sameDType('Concat', first, t);
      if (t.rank !== first.rank) throw graphError(`Concat: expected rank ${first.rank} inputs, got ${t.toString()}`);
      t.shape.forEach((d, i) => {
        if (i !== ax && d !== first.shape[i]) throw graphError(`Concat: dims off the concat axis must match: expected ${formatShape(first.shape)} at axis ${i}, got ${t.toString()}`);
      });
    }
    const shape = first.shape.map((d, i) => (i === ax ? sumDims(xs.map((t) => t.shape[ax] as Dim)) : d));
    return this.one('Concat', xs, { axis: attr.int(ax) }, first.dtype, shape);
  }

  /**
   * Slice along one or more axes. Emitted as one single-axis Slice node per axis,
   * so the Slice gradient rule only ever deals with one axis.
   */
  slice(x: Tensor, specs: SliceSpec | readonly SliceSpec[]): Tensor {
    let out = x;
    for (const s of Array.isArray(specs) ? (specs as readonly SliceSpec[]) : [specs as SliceSpec]) {
      const ax = normalizeAxis(s.axis, out.rank, 'Slice');
      const step = s.step ?? 1;
      if (!Number.isInteger(step) || step === 0) throw graphError(`Slice: expected a non-zero integer step, got ${step}`);
      const dim = declaredDim('Slice', sliceDim(out.shape[ax] as Dim, s.start, s.end, step), s.dim) ?? this.freshDim('slice');
      const inputs = [out, this.indexInput(s.start), this.indexInput(s.end), this.ints([ax]), this.ints([step])];
      out = this.one('Slice', inputs, {}, out.dtype, out.shape.map((d, i) => (i === ax ? dim : d)));
    }
    return out;
  }

  squeeze(x: Tensor, axes: readonly number[]): Tensor {
    const norm = axes.map((a) => normalizeAxis(a, x.rank, 'Squeeze'));
    for (const a of norm) if (x.shape[a] !== 1) throw graphError(`Squeeze: axis ${a} must have size 1: expected 1, got ${String(x.shape[a])} in ${x.toString()}`);
    return this.one('Squeeze', [x, this.ints(norm)], {}, x.dtype, x.shape.filter((_, i) => !norm.includes(i)));
  }

  unsqueeze(x: Tensor, axes: readonly number[]): Tensor {
    const rank = x.rank + axes.length;
    const norm = axes.map((a) => normalizeAxis(a, rank, 'Unsqueeze'));
    const shape: Dim[] = [];
    let src = 0;
    for (let i = 0; i < rank; i++) shape.push(norm.includes(i) ? 1 : (x.shape[src++] as Dim));
    return this.one('Unsqueeze', [x, this.ints(norm)], {}, x.dtype, shape);
  }

  /** The run-time shape of `x` (int64 1-D), optionally dims [start, end). */
  shape(x: Tensor, start = 0, end = x.rank): Tensor {
    const n = Math.max(0, Math.min(end, x.rank) - Math.max(0, start));
    const attrs: Attrs = start === 0 && end === x.rank ? {} : { start: attr.int(start), end: attr.int(end) };
    return this.one('Shape', [x], attrs, 'int64', [n]);
  }

  /** Number of elements of `x`, int64 scalar. */
  size(x: Tensor): Tensor {
    return this.one('Size', [x], {}, 'int64', []);
  }

  // ---- indexing -------------------------------------------------------------------------

  /** Take slices of `data` along `axis` at `indices` (embeddings: gather(table, ids, 0)). */
  gather(data: Tensor, indices: Tensor, axis = 0): Tensor {
    this.expectIndices('Gather', indices);
    const ax = normalizeAxis(axis, data.rank, 'Gather');
    const shape = [...data.shape.slice(0, ax), ...indices.shape, ...data.shape.slice(ax + 1)];
    return this.one('Gather', [data, indices], { axis: attr.int(ax) }, data.dtype, shape);
  }

  /** out[i][j] = data[indices[i][j]][j] for axis 0 (and so on); output has the indices' shape. */
  gatherElements(data: Tensor, indices: Tensor, axis: number): Tensor {
    this.expectIndices('GatherElements', indices);
    if (indices.rank !== data.rank) throw graphError(`GatherElements: expected indices of rank ${data.rank}, got ${indices.toString()}`);
    const ax = normalizeAxis(axis, data.rank, 'GatherElements');
    return this.one('GatherElements', [data, indices], { axis: attr.int(ax) }, data.dtype, indices.shape);
  }

  /** Gather by index tuples in the last dim of `indices` (static size). */
  gatherND(data: Tensor, indices: Tensor): Tensor {
    this.expectIndices('GatherND', indices);
    const k = indices.shape[indices.rank - 1];
    if (typeof k !== 'number' || k > data.rank) throw graphError(`GatherND: expected a static last dim <= ${data.rank} in indices, got ${indices.toString()}`);
    return this.one('GatherND', [data, indices], {}, data.dtype, [...indices.shape.slice(0, -1), ...data.shape.slice(k)]);
  }

  scatterElements(data: Tensor, indices: Tensor, updates: Tensor, axis: number, reduction: 'none' | 'add' = 'none'): Tensor {
    this.expectIndices('ScatterElements', indices);
    this.sameDType('ScatterElements', data, updates);
    if (indices.rank !== data.rank || updates.rank !== data.rank) throw graphError(`ScatterElements: expected indices and updates of rank ${data.rank}, got ${indices.toString()} and ${updates.toString()}`);
    const ax = normalizeAxis(axis, data.rank, 'ScatterElements');
    return this.one('ScatterElements', [data, indices, updates], { axis: attr.int(ax), reduction: attr.string(reduction) }, data.dtype, data.shape);
  }

  scatterND(data: Tensor, indices: Tensor, updates: Tensor, reduction: 'none' | 'add' = 'none'): Tensor {
    this.expectIndices('ScatterND', indices);
    this.sameDType('ScatterND', data, updates);
    const k = indices.shape[indices.rank - 1];
    if (typeof k !== 'number') throw graphError(`ScatterND: expected a static last dim in indices, got ${indices.toString()}`);
    const expected = [...indices.shape.slice(0, -1), ...data.shape.slice(k)];
    if (expected.length !== updates.rank) throw graphError(`ScatterND: expected updates of shape ${formatShape(expected)}, got ${updates.toString()}`);
    return this.one('ScatterND', [data, indices, updates], { reduction: attr.string(reduction) }, data.dtype, data.shape);
  }

  /**
   * The k largest (or smallest) values along `axis` and their int64 indices. `k` is a number
   * or a run-time int64 tensor of shape [] or [1] (then the axis gets a fresh symbolic dim).
   */
  topK(x: Tensor, k: number | Tensor, options: { axis?: number; largest?: boolean; sorted?: boolean } = {}): { values: Tensor; indices: Tensor } {
    const ax = normalizeAxis(options.axis ?? -1, x.rank, 'TopK');
    const d = x.shape[ax] as Dim;
    if (typeof k === 'number' && typeof d === 'number' && k > d) throw graphError(`TopK: expected k <= ${d} (axis ${ax} of ${x.toString()}), got ${k}`);
    let kInput: Tensor;
    if (typeof k === 'number') kInput = this.ints([k]);
    else {
      if (k.dtype !== 'int64' || k.rank > 1 || (k.rank === 1 && k.shape[0] !== 1)) throw graphError(`TopK: expected k as an int64 tensor of shape [] or [1], got ${k.toString()}`);
      kInput = k.rank === 0 ? this.unsqueeze(k, [0]) : k;
    }
    const kDim: Dim = typeof k === 'number' ? k : this.freshDim('top_k');
    const shape = x.shape.map((s, i) => (i === ax ? kDim : s));
    const attrs = { axis: attr.int(ax), largest: attr.int(options.largest === false ? 0 : 1), sorted: attr.int(options.sorted === false ? 0 : 1) };
    const [values, indices] = this.addNode('TopK', [x, kInput], attrs, [
      { dtype: x.dtype, shape },
      { dtype: 'int64', shape },
    ]);
    if (!values || !indices) throw graphError('TopK: produced no outputs');
    return { values, indices };
  }

  argMax(x: Tensor, axis = -1, options: { keepDims?: boolean; selectLastIndex?: boolean } = {}): Tensor {
    const ax = normalizeAxis(axis, x.rank, 'ArgMax');
    const keep = options.keepDims === true;
    const shape = keep ? x.shape.map((d, i) => (i === ax ? 1 : d)) : x.shape.filter((_, i) => i !== ax);
    const attrs = { axis: attr.int(ax), keepdims: attr.int(keep ? 1 : 0), select_last_index: attr.int(options.selectLastIndex ? 1 : 0) };
    return this.one('ArgMax', [x], attrs, 'int64', shape);
  }

  // ---- generators -------------------------------------------------------------------------

  /** [start, start+delta, ...) below `limit`; numbers become scalars of `dtype` (default int64). */
  /** `options.dim` declares the length when it is not static (see `SliceSpec.dim`). */
  range(start: Operand, limit: Operand, delta: Operand = 1, dtype: DType = 'int64', options: { dim?: Dim } = {}): Tensor {
    const t = (v: Operand): Tensor => (typeof v === 'number' ? this.scalar(v, dtype) : v);
    const [a, b, c] = [t(start), t(limit), t(delta)];
    for (const s of [a, b, c]) {
      if (s.rank !== 0) throw graphError(`Range: expected scalar inputs, got ${s.toString()}`);
      this.sameDType('Range', a, s);
    }
    const known = typeof start === 'number' && typeof limit === 'number' && typeof delta === 'number' ? Math.max(0, Math.ceil((limit - start) / delta)) : undefined;
    const n = declaredDim('Range', known, options.dim) ?? this.freshDim('range');
    return this.one('Range', [a, b, c], {}, a.dtype, [n]);
  }

  /** A tensor of `shape` filled with `value`. */
  full(shape: Shape, value: number, dtype: DType = 'float32'): Tensor {
    return this.one('ConstantOfShape', [this.dimsTensor(shape)], { value: attr.tensor(tensor(dtype, [1], [value])) }, dtype, shape);
  }

  /** A tensor shaped like `x` filled with `value` (dtype defaults to x's). */
  fullLike(x: Tensor, value: number, dtype: DType = x.dtype): Tensor {
    return this.one('ConstantOfShape', [this.shape(x)], { value: attr.tensor(tensor(dtype, [1], [value])) }, dtype, x.shape);
  }

  zerosLike(x: Tensor): Tensor {
    return this.fullLike(x, 0);
  }

  /** Uniform samples in [low, high) shaped like `x`. A fixed `seed` makes runs reproducible. */
  randomUniformLike(x: Tensor, options: { low?: number; high?: number; seed?: number; dtype?: DType } = {}): Tensor {
    const dtype = options.dtype ?? x.dtype;
    const attrs = {
      low: attr.float(options.low ?? 0),
      high: attr.float(options.high ?? 1),
      dtype: attr.int(ONNX_DTYPE_CODE[dtype]),
      ...(options.seed === undefined ? {} : { seed: attr.float(options.seed) }),
    };
    return this.one('RandomUniformLike', [x], attrs, dtype, x.shape);
  }

  // ---- control flow ------------------------------------------------------------------------

  /**
   * ONNX Loop. The body is built with its own Graph; it can read any tensor of
   * this graph (outer scope) and returns the next loop-carried values, the
   * continue condition and per-iteration scan values.
   */
  loop(spec: LoopSpec): LoopResult {
    return buildLoop(this, spec, () => new Graph(this));
  }

  /** ONNX If: both branches are built with their own Graph and return the same number of outputs and dtypes. */
  ifElse(cond: Tensor, thenBranch: (b: Graph) => readonly Tensor[], elseBranch: (b: Graph) => readonly Tensor[]): Tensor[] {
    return buildIf(this, cond, thenBranch, elseBranch, () => new Graph(this));
  }

  // ---- helpers ---------------------------------------------------------------------------

  private indexInput(v: number | Tensor): Tensor {
    if (typeof v === 'number') return this.ints([Number.isFinite(v) ? v : v > 0 ? SLICE_END : -SLICE_END]);
    this.expectIndices('Slice', v);
    if (v.rank === 1 && v.shape[0] === 1) return v;
    if (v.rank === 0) return this.unsqueeze(v, [0]);
    throw graphError(`Slice: expected a start/end tensor of shape [] or [1], got ${v.toString()}`);
  }
}


/** Output length of a one-axis slice when it can be known at build time (ONNX Slice clamping rules). */
function sliceDim(dim: Dim, start: number | Tensor, end: number | Tensor, step: number): Dim | undefined {
  if (typeof start !== 'number' || typeof end !== 'number') return undefined;
  if (typeof dim === 'number') {
    const clamp = (v: number, lo: number, hi: number): number => Math.min(Math.max(v, lo), hi);
    let s = start < 0 ? start + dim : start;
    let e = end < 0 ? end + dim : end;
    if (step > 0) {
      s = clamp(s, 0, dim);
      e = clamp(e, 0, dim);
      return Math.max(0, Math.ceil((e - s) / step));
    }
    s = clamp(s, 0, dim - 1);
    e = clamp(e, -1, dim - 1);
    return Math.max(0, Math.ceil((s - e) / -step));
  }
  if (step === 1 && start === 0 && end >= SLICE_END) return dim;
  // The last -start entries of a symbolic dim: assume it has that many.
  if (step === 1 && start < 0 && Number.isFinite(start) && end >= SLICE_END) return -start;
  // A symbolic dim sliced with non-negative bounds: assume the bounds lie inside it.
  if (step > 0 && start >= 0 && end >= 0 && Number.isFinite(end) && end < SLICE_END) return Math.max(0, Math.ceil((end - start) / step));
  return undefined;
}

/** A caller-declared result dim, checked against the inferred one when there is one. */
function declaredDim(op: string, inferred: Dim | undefined, declared: Dim | undefined): Dim | undefined {
  if (declared === undefined) return inferred;
  const valid = typeof declared === 'number' ? Number.isInteger(declared) && declared >= 0 : declared.length > 0;
  if (!valid) throw graphError(`${op}: expected the declared dim to be an integer >= 0 or a symbol name, got ${JSON.stringify(declared)}`);
  if (inferred !== undefined && inferred !== declared) throw graphError(`${op}: declared dim ${String(declared)} contradicts the inferred one: expected ${String(inferred)}, got ${String(declared)}`);
  return declared;
}

function sumDims(dims: readonly Dim[]): Dim {
  let total = 0;
  const symbols: string[] = [];
  for (const d of dims) {
    if (typeof d === 'number') total += d;
    else symbols.push(d);
  }
  if (symbols.length === 0) return total;
  return [...symbols.sort(), ...(total === 0 ? [] : [String(total)])].join('+');
}

/** total / known for dims, cancelling symbol factors of product symbols; `fresh` when it cannot be known. */
function divideDims(total: Dim, known: Dim, fresh: () => string): Dim {
  if (typeof total === 'number' && typeof known === 'number') {
    if (known === 0 || total % known !== 0) throw graphError(`Reshape: cannot infer -1: ${total} elements do not divide by ${known}`);
    return total / known;
  }
  const factors = (d: Dim): { coeff: number; names: string[] } => {
    if (typeof d === 'number') return { coeff: d, names: [] };
    let coeff = 1;
    const names: string[] = [];
    for (const f of d.split('*')) {
      if (/^\d+$/.test(f)) coeff *= Number(f);
      else names.push(f);
    }
    return { coeff, names };
  };
  const t = factors(total);
  const k = factors(known);
  for (const n of k.names) {
    const i = t.names.indexOf(n);
    if (i < 0) return fresh();
    t.names.splice(i, 1);
  }
  if (k.coeff === 0 || t.coeff % k.coeff !== 0) return fresh();
  return dimProduct([t.coeff / k.coeff, ...t.names]);
}
