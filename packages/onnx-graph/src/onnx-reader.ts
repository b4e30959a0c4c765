import { AppError, ErrorCode, appendAll } from '@sqlenv/shared';
import { ProtoReader } from './protobuf-wire.ts';
import type { AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetId, StringStringEntry, TensorProto, ValueInfoProto } from './onnx-proto.ts';
import type { Dim } from './shape.ts';

/**
 * bytes -> ModelProto: enough of onnx.proto to inspect what encodeModel wrote
 * (and typical exporter output). Unknown fields are skipped. `rawData` views
 * point into the input buffer.
 */
export function decodeModel(bytes: Uint8Array): ModelProto {
  const r = new ProtoReader(bytes);
  const m: ModelProto = { irVersion: 0, opsetImport: [], producerName: '', producerVersion: '', graph: emptyGraph() };
  let sawGraph = false;
  for (let f = r.next(); f; f = r.next()) {
    if (f.field === 1) m.irVersion = r.varint();
    else if (f.field === 2) m.producerName = r.string();
    else if (f.field === 3) m.producerVersion = r.string();
    else if (f.field === 6) m.docString = r.string();
    else if (f.field === 7) {
      m.graph = readGraph(r.sub());
      sawGraph = true;
    } else if (f.field === 8) m.opsetImport.push(readOpset(r.sub()));
    else if (f.field === 14) (m.metadataProps ??= []).push(readEntry(r.sub()));
    else r.skip(f.wireType);
  }
  if (!sawGraph) throw new AppError(ErrorCode.GRAPH, 'decodeModel: expected a ModelProto with a graph, got none');
  return m;
}

function emptyGraph(): GraphProto {
  return { name: '', node: [], initializer: [], input: [], output: [], valueInfo: [] };
}

function readOpset(r: ProtoReader): OperatorSetId {
  const o: OperatorSetId = { domain: '', version: 0 };
  for (let f = r.next(); f; f = r.next()) {
    if (f.field === 1) o.domain = r.string();
    else if (f.field === 2) o.version = r.varint();
    else r.skip(f.wireType);
  }
  return o;
}

function readEntry(r: ProtoReader): StringStringEntry {
  const e: StringStringEntry = { key: '', value: '' };
  for (let f = r.next(); f; f = r.next()) {
    if (f.field === 1) e.key = r.string();
    else if (f.field === 2) e.value = r.string();
    else r.skip(f.wireType);
  }
  return e;
}

export function readGraph(r: ProtoReader): GraphProto {
  const g = emptyGraph();
  for (let f = r.next(); f; f = r.next()) {
    if (f.field === 1) g.node.push(readNode(r.sub()));
    else if (f.field === 2) g.name = r.string();
    else if (f.field === 5) g.initializer.push(readTensor(r.sub()));
    else if (f.field === 10) g.docString = r.string();
    else if (f.field === 11) g.input.push(readValueInfo(r.sub()));
    else if (f.field === 12) g.output.push(readValueInfo(r.sub()));
    else if (f.field === 13) g.valueInfo.push(readValueInfo(r.sub()));
    else r.skip(f.wireType);
  }
  return g;
}

function readNode(r: ProtoReader): NodeProto {
  const n: NodeProto = { name: '', opType: '', domain: '', input: [], output: [], attribute: [] };
  for (let f = r.next(); f; f = r.next()) {
    if (f.field === 1) n.input.push(r.string());
    else if (f.field === 2) n.output.push(r.string());
    else if (f.field === 3) n.name = r.string();
    else if (f.field === 4) n.opType = r.string();
    else if (f.field === 5) n.attribute.push(readAttribute(r.sub()));
    else if (f.field === 7) n.domain = r.string();
    else r.skip(f.wireType);
  }
  return n;
}

function readAttribute(r: ProtoReader): AttributeProto {
  let name = '';
  let type = 0;
  let f32 = 0;
  let i64 = 0;
  let s = '';
  let t: TensorProto | undefined;
  let g: GraphProto | undefined;
  const floats: number[] = [];
  const ints: number[] = [];
  const strings: string[] = [];
  for (let f = r.next(); f; f = r.next()) {
    if (f.field === 1) name = r.string();
    else if (f.field === 2) f32 = r.float();
    else if (f.field === 3) i64 = r.varint();
    else if (f.field === 4) s = r.string();
    else if (f.field === 5) t = readTensor(r.sub());
    else if (f.field === 6) g = readGraph(r.sub());
    else if (f.field === 7) appendAll(floats, r.floats(f.wireType));
    else if (f.field === 8) appendAll(ints, r.varints(f.wireType));
    else if (f.field === 9) strings.push(r.string());
    else if (f.field === 20) type = r.varint();
    else r.skip(f.wireType);
  }
  switch (type) {
    case 1:
      return { name, type: 'float', f: f32 };
    case 2:
      return { name, type: 'int', i: i64 };
    case 3:
      return { name, type: 'string', s };
    case 4:
      if (t) return { name, type: 'tensor', t };
      break;
    case 5:
      if (g) return { name, type: 'graph', g };
      break;
    case 6:
      return { name, type: 'floats', floats };
    case 7:
      return { name, type: 'ints', ints };
    case 8:
      return { name, type: 'strings', strings };
  }
  throw new AppError(ErrorCode.GRAPH, `decodeModel: attribute '${name}': expected a supported type with its value, got type code ${type}`);
}

function readTensor(r: ProtoReader): TensorProto {
  const t: TensorProto = { name: '', dataType: 0, dims: [] };
  for (let f = r.next(); f; f = r.next()) {
    if (f.field === 1) appendAll(t.dims, r.varints(f.wireType));
    else if (f.field === 2) t.dataType = r.varint();
    else if (f.field === 4) appendAll((t.floatData ??= []), r.floats(f.wireType));
    else if (f.field === 5) appendAll((t.int32Data ??= []), r.varints(f.wireType));
    else if (f.field === 7) appendAll((t.int64Data ??= []), r.varints(f.wireType));
    else if (f.field === 8) t.name = r.string();
    else if (f.field === 9) t.rawData = r.bytes();
    else if (f.field === 10) appendAll((t.doubleData ??= []), r.doubles(f.wireType));
    else if (f.field === 13) (t.externalData ??= []).push(readEntry(r.sub()));
    else if (f.field === 14) t.dataLocation = r.varint() === 1 ? 'external' : 'default';
    else r.skip(f.wireType);
  }
  return t;
}

function readValueInfo(r: ProtoReader): ValueInfoProto {
  const v: ValueInfoProto = { name: '', elemType: 0 };
  for (let f = r.next(); f; f = r.next()) {
    if (f.field === 1) v.name = r.string();
    else if (f.field === 2) readType(r.sub(), v);
    else r.skip(f.wireType);
  }
  return v;
}

function readType(r: ProtoReader, v: ValueInfoProto): void {
  for (let f = r.next(); f; f = r.next()) {
    if (f.field !== 1) {
      r.skip(f.wireType);
      continue;
    }
    const tt = r.sub();
    for (let g = tt.next(); g; g = tt.next()) {
      if (g.field === 1) v.elemType = tt.varint();
      else if (g.field === 2) v.shape = readShape(tt.sub());
      else tt.skip(g.wireType);
    }
  }
}

function readShape(r: ProtoReader): Dim[] {
  const dims: Dim[] = [];
  for (let f = r.next(); f; f = r.next()) {
    if (f.field !== 1) {
      r.skip(f.wireType);
      continue;
    }
    const d = r.sub();
    let dim: Dim = '?';
    for (let g = d.next(); g; g = d.next()) {
      if (g.field === 1) dim = d.varint();
      else if (g.field === 2) dim = d.string();
      else d.skip(g.wireType);
    }
    dims.push(dim);
  }
  return dims;
}
