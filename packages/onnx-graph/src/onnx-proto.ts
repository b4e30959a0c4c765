import type { Dim } from './shape.ts';

/**
 * The subset of onnx.proto (https://github.com/onnx/onnx/blob/main/onnx/onnx.proto)
 * this package writes and reads, as plain data. Field numbers live in
 * onnx-writer.ts / onnx-reader.ts next to the code that uses them.
 */
export interface ModelProto {
  irVersion: number;
  opsetImport: OperatorSetId[];
  producerName: string;
  producerVersion: string;
  docString?: string;
  graph: GraphProto;
  metadataProps?: StringStringEntry[];
}

export interface OperatorSetId {
  domain: string;
  version: number;
}

export interface StringStringEntry {
  key: string;
  value: string;
}

export interface GraphProto {
  name: string;
  node: NodeProto[];
  initializer: TensorProto[];
  input: ValueInfoProto[];
  output: ValueInfoProto[];
  valueInfo: ValueInfoProto[];
  docString?: string;
}

export interface NodeProto {
  name: string;
  opType: string;
  domain: string;
  input: string[];
  output: string[];
  attribute: AttributeProto[];
}

export type AttributeProto =
  | { name: string; type: 'float'; f: number }
  | { name: string; type: 'int'; i: number }
  | { name: string; type: 'string'; s: string }
  | { name: string; type: 'tensor'; t: TensorProto }
  | { name: string; type: 'graph'; g: GraphProto }
  | { name: string; type: 'floats'; floats: number[] }
  | { name: string; type: 'ints'; ints: number[] }
  | { name: string; type: 'strings'; strings: string[] };

export type AttributeType = AttributeProto['type'];

/** `AttributeProto.AttributeType` codes. */
export const ATTRIBUTE_TYPE_CODE = {
  float: 1,
  int: 2,
  string: 3,
  tensor: 4,
  graph: 5,
  floats: 6,
  ints: 7,
  strings: 8,
} as const satisfies Record<AttributeType, number>;

export interface TensorProto {
  name: string;
  /** `TensorProto.DataType` code. */
  dataType: number;
  dims: number[];
  /** Little-endian element bytes, when stored inline. */
  rawData?: Uint8Array;
  /** Typed fields some writers use instead of raw_data (read only). */
  floatData?: number[];
  doubleData?: number[];
  int32Data?: number[];
  int64Data?: number[];
  /** `location`, `offset`, `length` when `dataLocation` is 'external'. */
  externalData?: StringStringEntry[];
  dataLocation?: 'default' | 'external';
}

export interface ValueInfoProto {
  name: string;
  /** Tensor element type code and shape (dims: number = dim_value, string = dim_param). */
  elemType: number;
  shape?: Dim[];
}
