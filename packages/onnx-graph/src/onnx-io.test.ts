import { describe, expect, it } from 'vitest';
import { Graph } from './graph.ts';
import type { ModelProto } from './onnx-proto.ts';
import { decodeModel } from './onnx-reader.ts';
import { encodeModel } from './onnx-writer.ts';
import { ProtoReader, ProtoWriter } from './protobuf-wire.ts';
import { createSession } from './runtime/session.ts';
import { tensor, toNumbers } from './tensor-data.ts';

describe('protobuf wire format', () => {
  it('round-trips varints including negative int64 and 2^53-1', () => {
    const values = [0, 1, 127, 128, 300, 2 ** 31, 2 ** 32 + 5, Number.MAX_SAFE_INTEGER, -1, -2, -(2 ** 40)];
    const w = new ProtoWriter();
    for (const v of values) w.int(3, v);
    const r = new ProtoReader(w.finish());
    const got: number[] = [];
    for (let f = r.next(); f; f = r.next()) {
      expect(f).toEqual({ field: 3, wireType: 0 });
      got.push(r.varint());
    }
    expect(got).toEqual(values);
  });

  it('encodes known bytes (protobuf docs example: field 1 = 150 -> 08 96 01)', () => {
    const w = new ProtoWriter();
    w.int(1, 150);
    expect([...w.finish()]).toEqual([0x08, 0x96, 0x01]);
    const s = new ProtoWriter();
    s.string(2, 'testing');
    expect([...s.finish()]).toEqual([0x12, 0x07, ...new TextEncoder().encode('testing')]);
  });

  it('reads packed and unpacked repeated varints alike', () => {
    const packed = new ProtoWriter();
    const inner = new ProtoWriter();
    for (const v of [3, 270, 86942]) inner.varint(v);
    packed.message(4, inner);
    const r = new ProtoReader(packed.finish());
    const f = r.next();
    expect(r.varints(f?.wireType ?? -1)).toEqual([3, 270, 86942]);
  });
});

function sampleModel(): ModelProto {
  const g = new Graph();
  const x = g.input('x', 'float32', ['B', 3]);
  const w = g.initializer('w', tensor('float32', [3, 2], [1, 2, 3, 4, 5, 6]));
  const big = g.initializer('big', tensor('float64', [2], [0.5, -0.25]), { external: true });
  const y = g.gemm(x, w, null, { alpha: 0.5, transA: false });
  const s = g.slice(y, { axis: 1, start: -1, end: Infinity });
  const { carried } = g.loop({ maxTrips: 2, carried: [s], body: (b, { carried: [c] }) => ({ carried: [b.mul(c!, 2)] }) });
  g.output('y', carried[0]!);
  g.output('big_out', g.mul(big, 2));
  return g.toModel({ docString: 'round trip' }).proto;
}

describe('ONNX writer and reader', () => {
  it('round-trips a model with initializers, external data, attributes and a Loop subgraph', () => {
    const proto = sampleModel();
    const decoded = decodeModel(encodeModel(proto));
    expect(decoded).toEqual(proto);
    expect(decoded.opsetImport).toEqual([{ domain: '', version: 17 }]);
    const loop = decoded.graph.node.find((n) => n.opType === 'Loop');
    const body = loop?.attribute.find((a) => a.name === 'body');
    expect(body?.type).toBe('graph');
    const ext = decoded.graph.initializer.find((t) => t.name === 'big');
    expect(ext?.dataLocation).toBe('external');
    expect(ext?.externalData?.map((e) => e.key)).toEqual(['location', 'offset', 'length']);
    const slice = decoded.graph.node.find((n) => n.opType === 'Slice');
    expect(slice).toBeDefined();
    expect(decoded.graph.input[0]).toEqual({ name: 'x', elemType: 1, shape: ['B', 3] });
  });

  it('rejects truncated bytes with a GRAPH error', () => {
    const bytes = encodeModel(sampleModel());
    expect(() => decodeModel(bytes.subarray(0, bytes.length - 7))).toThrow(/protobuf decode|expected/);
  });

  it('moves large initializers to external data in auto mode and ORT loads them from memory', async () => {
    const g = new Graph();
    const x = g.input('x', 'float32', [4]);
    const w = g.initializer('w', tensor('float32', [2 ** 18], new Float32Array(2 ** 18).fill(0.5))); // 1 MiB
    const small = g.initializer('small', tensor('float32', [4], [1, 2, 3, 4]));
    g.output('y', g.add(g.mul(x, small), g.reduceSum(w)));
    const model = g.toModel({ externalData: 'auto', inlineLimitBytes: 1024 });
    expect(model.externalData.map((f) => f.data.byteLength)).toEqual([2 ** 20]);
    expect(encodeModel(model.proto).byteLength).toBeLessThan(4096);
    const session = await createSession(model, { mode: 'direct' });
    const out = await session.run({ x: tensor('float32', [4], [1, 1, 1, 1]) });
    await session.close();
    expect(toNumbers(out.y!)).toEqual([1 + 2 ** 17, 2 + 2 ** 17, 3 + 2 ** 17, 4 + 2 ** 17]);
  });

  it('pins the opset', () => {
    const g = new Graph();
    g.output('y', g.identity(g.input('x', 'float32', [1])));
    expect(() => g.toModel({ opset: 18 })).toThrow(/expected 17, got 18/);
  });
});
