import { AppError, ErrorCode } from '@sqlenv/shared';
import { allocTyped, type DType, type TypedArrayFor } from './dtype.ts';

/**
 * A dense tensor value on the JS side: dtype, dims and a typed array in
 * row-major order. A discriminated union, so `if (t.dtype === 'float32')`
 * narrows `t.data` to a Float32Array.
 */
export type TensorData = TensorDataOf<DType>;
/** Distributes over unions: TensorDataOf<'float32' | 'int64'> is a union of the two. */
export type TensorDataOf<D extends DType> = D extends DType
  ? {
      readonly dtype: D;
      readonly dims: readonly number[];
      readonly data: TypedArrayFor<D>;
    }
  : never;

/** The one place a freshly built record is asserted to match its dtype. */
function makeTensorData<D extends DType>(dtype: D, dims: readonly number[], data: TypedArrayFor<D>): TensorDataOf<D> {
  return { dtype, dims: [...dims], data } as unknown as TensorDataOf<D>;
}

export type TensorValues = ArrayLike<number> | ArrayLike<bigint> | ArrayLike<boolean>;

export function elementCount(dims: readonly number[]): number {
  let n = 1;
  for (const d of dims) n *= d;
  return n;
}

/**
 * Build a TensorData, converting plain JS values when needed
 * (numbers to bigint for int64, IEEE half bits for float16, 0/1 for bool).
 * A typed array of the right kind is used as is, without a copy.
 */
export function tensor<D extends DType>(dtype: D, dims: readonly number[], values: TypedArrayFor<D> | TensorValues): TensorDataOf<D> {
  const n = elementCount(dims);
  if (values.length !== n) {
    throw new AppError(ErrorCode.GRAPH, `tensor(${dtype}, [${dims.join(', ')}]): expected ${n} values, got ${values.length}`);
  }
  const out = allocTyped(dtype, 0);
  if (values.constructor === out.constructor) return makeTensorData(dtype, dims, values as TypedArrayFor<D>);
  const data = allocTyped(dtype, n);
  for (let i = 0; i < n; i++) {
    const v = values[i] as number | bigint | boolean;
    if (dtype === 'int64') (data as BigInt64Array)[i] = typeof v === 'bigint' ? v : BigInt(Math.trunc(Number(v)));
    else if (dtype === 'float16') (data as Uint16Array)[i] = floatToHalfBits(Number(v));
    else if (dtype === 'bool') (data as Uint8Array)[i] = v ? 1 : 0;
    else (data as Float32Array | Float64Array | Int32Array)[i] = Number(v);
  }
  return makeTensorData(dtype, dims, data);
}

/** A rank-0 tensor. */
export function scalar<D extends DType>(dtype: D, value: number | bigint | boolean): TensorDataOf<D> {
  return tensor(dtype, [], [value] as TensorValues);
}

/** Values as plain numbers (int64 via Number, float16 decoded, bool as 0/1): for tests and tooling. */
export function toNumbers(t: TensorData): number[] {
  if (t.dtype === 'float16') return Array.from(t.data, halfBitsToFloat);
  if (t.dtype === 'int64') return Array.from(t.data, (v) => Number(v));
  return Array.from(t.data as ArrayLike<number>);
}

/** The little-endian bytes of a tensor, as a view (no copy) when the platform is little-endian. */
export function tensorBytes(t: TensorData): Uint8Array {
  if (!LITTLE_ENDIAN) throw new AppError(ErrorCode.GRAPH, 'big-endian platforms are not supported (ONNX raw_data is little-endian)');
  return new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
}

/** Decode little-endian bytes into a TensorData (copies into an aligned buffer). */
export function tensorFromBytes<D extends DType>(dtype: D, dims: readonly number[], bytes: Uint8Array): TensorDataOf<D> {
  const data = allocTyped(dtype, elementCount(dims));
  if (data.byteLength !== bytes.byteLength) {
    throw new AppError(ErrorCode.GRAPH, `tensor ${dtype}[${dims.join(', ')}]: expected ${data.byteLength} bytes, got ${bytes.byteLength}`);
  }
  new Uint8Array(data.buffer).set(bytes);
  return makeTensorData(dtype, dims, data);
}

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** IEEE 754 binary32 -> binary16 bits, round to nearest even (handles subnormals, inf, NaN). */
export function floatToHalfBits(value: number): number {
  f32[0] = value;
  const x = u32[0] ?? 0;
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  let e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    const half = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const mid = 1 << (shift - 1);
    return sign | (half + (rem > mid || (rem === mid && half & 1) ? 1 : 0));
  }
  let half = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && half & 1)) half++;
  e = half;
  return sign | e;
}

export function halfBitsToFloat(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exp = (bits >>> 10) & 0x1f;
  const mant = bits & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}
