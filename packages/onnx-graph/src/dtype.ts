/**
 * Element types the builder supports, their ONNX `TensorProto.DataType` codes
 * (onnx/onnx.proto) and the typed arrays that carry them across the JS boundary.
 * bfloat16 is deliberately absent: onnxruntime-node cannot pass it to or from JS.
 */
export const DTYPES = ['float32', 'float64', 'float16', 'int64', 'int32', 'bool'] as const;
export type DType = (typeof DTYPES)[number];
export type FloatDType = 'float32' | 'float64' | 'float16';

/** `TensorProto.DataType` values from onnx.proto. */
export const ONNX_DTYPE_CODE = {
  float32: 1,
  int32: 6,
  int64: 7,
  bool: 9,
  float16: 10,
  float64: 11,
} as const satisfies Record<DType, number>;

/** Bytes per element, as stored in `raw_data` (bool is one byte). */
export const DTYPE_SIZE_BYTES = {
  float32: 4,
  float64: 8,
  float16: 2,
  int64: 8,
  int32: 4,
  bool: 1,
} as const satisfies Record<DType, number>;

/** The typed array that holds each dtype (float16 as raw bits; bool as 0/1 bytes, as in onnxruntime-common). */
export interface TypedArrayByDType {
  float32: Float32Array;
  float64: Float64Array;
  float16: Uint16Array;
  int64: BigInt64Array;
  int32: Int32Array;
  bool: Uint8Array;
}
export type TypedArrayFor<D extends DType> = TypedArrayByDType[D];
export type AnyTypedArray = TypedArrayByDType[DType];

export function isDType(value: string): value is DType {
  return (DTYPES as readonly string[]).includes(value);
}

export function isFloatDType(dtype: DType): dtype is FloatDType {
  return dtype === 'float32' || dtype === 'float64' || dtype === 'float16';
}

export function dtypeFromOnnxCode(code: number): DType | undefined {
  for (const d of DTYPES) if (ONNX_DTYPE_CODE[d] === code) return d;
  return undefined;
}

/** Allocate a zeroed typed array for `dtype`. */
export function allocTyped<D extends DType>(dtype: D, length: number): TypedArrayFor<D> {
  const arrays: { [K in DType]: (n: number) => TypedArrayByDType[K] } = {
    float32: (n) => new Float32Array(n),
    float64: (n) => new Float64Array(n),
    float16: (n) => new Uint16Array(n),
    int64: (n) => new BigInt64Array(n),
    int32: (n) => new Int32Array(n),
    bool: (n) => new Uint8Array(n),
  };
  return arrays[dtype](length) as TypedArrayFor<D>;
}
