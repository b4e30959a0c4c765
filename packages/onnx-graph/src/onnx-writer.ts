import { ProtoWriter } from './protobuf-wire.ts';
import { ATTRIBUTE_TYPE_CODE, type AttributeProto, type GraphProto, type ModelProto, type NodeProto, type StringStringEntry, type TensorProto, type ValueInfoProto } from './onnx-proto.ts';

/**
 * ModelProto -> bytes. Field numbers are those of onnx.proto; onnx.proto is
 * proto2, so repeated scalars are written unpacked (the canonical proto2 form;
 * every parser also accepts packed, and our reader accepts both).
 */
export function encodeModel(model: ModelProto): Uint8Array {
  return writeModel(model).finish();
}

function writeModel(m: ModelProto): ProtoWriter {
  const w = new ProtoWriter();
  w.int(1, m.irVersion);
  w.string(2, m.producerName);
  w.string(3, m.producerVersion);
  if (m.docString) w.string(6, m.docString);
  w.message(7, writeGraph(m.graph));
  for (const o of m.opsetImport) {
    const ow = new ProtoWriter();
    ow.string(1, o.domain);
    ow.int(2, o.version);
    w.message(8, ow);
  }
  for (const e of m.metadataProps ?? []) w.message(14, writeEntry(e));
  return w;
}

export function writeGraph(g: GraphProto): ProtoWriter {
  const w = new ProtoWriter();
  for (const n of g.node) w.message(1, writeNode(n));
  w.string(2, g.name);
  for (const t of g.initializer) w.message(5, writeTensor(t));
  if (g.docString) w.string(10, g.docString);
  for (const v of g.input) w.message(11, writeValueInfo(v));
  for (const v of g.output) w.message(12, writeValueInfo(v));
  for (const v of g.valueInfo) w.message(13, writeValueInfo(v));
  return w;
}

function writeNode(n: NodeProto): ProtoWriter {
  const w = new ProtoWriter();
  for (const i of n.input) w.string(1, i);
  for (const o of n.output) w.string(2, o);
  w.string(3, n.name);
  w.string(4, n.opType);
  for (const a of n.attribute) w.message(5, writeAttribute(a));
  if (n.domain) w.string(7, n.domain);
  return w;
}

function writeAttribute(a: AttributeProto): ProtoWriter {
  const w = new ProtoWriter();
  w.string(1, a.name);
  w.int(20, ATTRIBUTE_TYPE_CODE[a.type]);
  switch (a.type) {
    case 'float':
      w.float(2, a.f);
      break;
    case 'int':
      w.int(3, a.i);
      break;
    case 'string':
      w.string(4, a.s);
      break;
    case 'tensor':
      w.message(5, writeTensor(a.t));
      break;
    case 'graph':
      w.message(6, writeGraph(a.g));
      break;
    case 'floats':
      for (const f of a.floats) w.float(7, f);
      break;
    case 'ints':
      for (const i of a.ints) w.int(8, i);
      break;
    case 'strings':
      for (const s of a.strings) w.string(9, s);
      break;
  }
  return w;
}

function writeTensor(t: TensorProto): ProtoWriter {
  const w = new ProtoWriter();
  for (const d of t.dims) w.int(1, d);
  w.int(2, t.dataType);
  w.string(8, t.name);
  if (t.rawData !== undefined) w.bytes(9, t.rawData);
  for (const e of t.externalData ?? []) w.message(13, writeEntry(e));
  if (t.dataLocation === 'external') w.int(14, 1);
  return w;
}

function writeValueInfo(v: ValueInfoProto): ProtoWriter {
  // ValueInfoProto{name=1, type=2}; TypeProto{tensor_type=1}; TypeProto.Tensor{elem_type=1, shape=2};
  // TensorShapeProto{dim=1}; Dimension{dim_value=1, dim_param=2}.
  const tensorType = new ProtoWriter();
  tensorType.int(1, v.elemType);
  if (v.shape !== undefined) {
    const shape = new ProtoWriter();
    for (const d of v.shape) {
      const dim = new ProtoWriter();
      if (typeof d === 'number') dim.int(1, d);
      else dim.string(2, d);
      shape.message(1, dim);
    }
    tensorType.message(2, shape);
  }
  const type = new ProtoWriter();
  type.message(1, tensorType);
  const w = new ProtoWriter();
  w.string(1, v.name);
  w.message(2, type);
  return w;
}

function writeEntry(e: StringStringEntry): ProtoWriter {
  const w = new ProtoWriter();
  w.string(1, e.key);
  w.string(2, e.value);
  return w;
}
