import { AppError, ErrorCode } from '@sqlenv/shared';

/**
 * A dimension is a non-negative integer or a symbol ('B', 'T', 'B*T').
 * Two symbolic dims are equal when their names are equal; the builder assumes
 * that, and ONNX Runtime checks the real sizes at run time.
 */
export type Dim = number | string;
export type Shape = readonly Dim[];

export function formatShape(shape: Shape): string {
  return `[${shape.map((d) => (typeof d === 'string' ? `'${d}'` : String(d))).join(', ')}]`;
}

export function graphError(message: string, details?: Record<string, unknown>): AppError {
  return new AppError(ErrorCode.GRAPH, message, details === undefined ? {} : { details });
}

export function isStaticShape(shape: Shape): shape is readonly number[] {
  return shape.every((d) => typeof d === 'number');
}

export function sameShape(a: Shape, b: Shape): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

/** Product of dims: a number when all static, otherwise a canonical product symbol ('4*B*T'). */
export function dimProduct(dims: Shape): Dim {
  let coeff = 1;
  const symbols: string[] = [];
  for (const d of dims) {
    if (typeof d === 'number') coeff *= d;
    else symbols.push(...d.split('*').filter((s) => s !== ''));
  }
  if (symbols.length === 0) return coeff;
  if (coeff === 0) return 0;
  const numeric = symbols.filter((s) => /^\d+$/.test(s));
  for (const s of numeric) coeff *= Number(s);
  const names = symbols.filter((s) => !/^\d+$/.test(s)).sort();
  return [...(coeff === 1 ? [] : [String(coeff)]), ...names].join('*');
}

/** Normalise an axis in [-rank, rank) to [0, rank), or throw naming the op. */
export function normalizeAxis(axis: number, rank: number, op: string): number {
  if (!Number.isInteger(axis) || axis < -rank || axis >= rank) {
    throw graphError(`${op}: axis expected in [${-rank}, ${rank - 1}], got ${axis}`);
  }
  return axis < 0 ? axis + rank : axis;
}

/** Numpy/ONNX multidirectional broadcasting of two shapes, checked at build time. */
export function broadcastShapes(a: Shape, b: Shape, op: string): Dim[] {
  const rank = Math.max(a.length, b.length);
  const out: Dim[] = [];
  for (let i = 0; i < rank; i++) {
    const da = a[a.length - rank + i] ?? 1;
    const db = b[b.length - rank + i] ?? 1;
    if (da === db || db === 1) out.push(da);
    else if (da === 1) out.push(db);
    else {
      throw graphError(
        `${op}: shapes ${formatShape(a)} and ${formatShape(b)} do not broadcast: at axis ${i - rank} expected equal dims or 1, got ${String(da)} and ${String(db)}`,
      );
    }
  }
  return out;
}

/** Axes of `outShape` over which a tensor of `inShape` was broadcast (leading axes included). */
export function broadcastAxes(inShape: Shape, outShape: Shape): number[] {
  const lead = outShape.length - inShape.length;
  const axes: number[] = [];
  for (let i = 0; i < outShape.length; i++) {
    if (i < lead) axes.push(i);
    else if (inShape[i - lead] === 1 && outShape[i] !== 1) axes.push(i);
  }
  return axes;
}

export function inversePermutation(perm: readonly number[]): number[] {
  const inv = new Array<number>(perm.length).fill(0);
  perm.forEach((p, i) => (inv[p] = i));
  return inv;
}
