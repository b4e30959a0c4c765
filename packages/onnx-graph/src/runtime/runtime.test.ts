import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AppError, ErrorCode, boxMullerNormals, mulberry32 } from '@sqlenv/shared';
import { attention, rmsNorm } from '../composites.ts';
import { Graph } from '../graph.ts';
import { encodeModel } from '../onnx-writer.ts';
import { tensor, type TensorData } from '../tensor-data.ts';
import { saveModel } from './model-files.ts';
import { parsePlacementLog } from './placement.ts';
import { createSession } from './session.ts';
import { ortSessionOptions, resolveSessionConfig } from './session-config.ts';

function smallModel(): Graph {
  const g = new Graph();
  const x = g.input('x', 'float32', ['B', 'T', 8]);
  const w = g.initializer('w', tensor('float32', [8], boxMullerNormals(mulberry32(1), 8)));
  const h = rmsNorm(x, w);
  const q = g.reshape(h, ['B', 'T', 2, 4]);
  const qh = g.transpose(q, [0, 2, 1, 3]); // (B, 2, T, 4)
  g.output('y', attention(qh, qh, qh));
  g.output('top', g.topK(x, 3).indices);
  return g;
}

const feeds = { x: tensor('float32', [2, 5, 8], boxMullerNormals(mulberry32(2), 80)) };

async function expectAppError(p: Promise<unknown>, code: string, message: RegExp): Promise<void> {
  const error = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(AppError);
  expect((error as AppError).code).toBe(code);
  expect((error as AppError).message).toMatch(message);
}

describe('createSession', () => {
  it('worker-thread mode gives outputs identical to direct mode', async () => {
    const model = smallModel().toModel();
    const direct = await createSession(model, { mode: 'direct', intraOpThreads: 1 });
    const worker = await createSession(model, { mode: 'worker', intraOpThreads: 1 });
    const [a, b] = [await direct.run(feeds), await worker.run(feeds)];
    // Several runs in flight on the worker come back in order and correct.
    const many = await Promise.all([worker.run(feeds), worker.run(feeds, { outputs: ['y'] })]);
    await direct.close();
    await worker.close();
    await worker.close(); // idempotent
    expect(b.y!.dims).toEqual([2, 2, 5, 4]);
    expect(b.y!.data).toEqual(a.y!.data);
    expect(b.top!.data).toEqual(a.top!.data);
    expect(many[0].y!.data).toEqual(a.y!.data);
    expect(Object.keys(many[1])).toEqual(['y']);
    await expectAppError(worker.run(feeds), ErrorCode.RUNTIME, /session is closed/);
  });

  it('keeps the event loop turning while a worker run is in flight', async () => {
    const g = new Graph();
    const x = g.input('x', 'float32', [256, 256]);
    let h = x;
    for (let i = 0; i < 40; i++) h = g.tanh(g.matMul(h, x));
    g.output('y', h);
    const session = await createSession(g.toModel(), { mode: 'worker' });
    const input: Record<string, TensorData> = { x: tensor('float32', [256, 256], new Float32Array(256 * 256).fill(0.01)) };
    let turned = false;
    const run = session.run(input);
    setImmediate(() => (turned = true));
    await run;
    await session.close();
    expect(turned).toBe(true);
  });

  it('checks feeds against the graph inputs before running', async () => {
    const session = await createSession(smallModel().toModel(), { mode: 'worker' });
    await expectAppError(session.run({}), ErrorCode.VALIDATION, /missing input 'x'/);
    await expectAppError(session.run({ x: tensor('float64', [1, 1, 8], new Float64Array(8)) }), ErrorCode.VALIDATION, /expected dtype float32, got float64/);
    await expectAppError(session.run({ x: tensor('float32', [1, 8], new Float32Array(8)) }), ErrorCode.VALIDATION, /expected shape \['B', 'T', 8\], got \[1, 8\]/);
    await session.close();
  });

  it('rejects an unknown provider or bad thread count naming what it expected', async () => {
    const model = smallModel().toModel();
    await expectAppError(createSession(model, { provider: 'tpu' as never }), ErrorCode.VALIDATION, /'provider': expected cpu \| cuda \| webgpu, got "tpu"/);
    await expectAppError(createSession(model, { intraOpThreads: 0 }), ErrorCode.VALIDATION, /'intraOpThreads': expected an integer >= 1, got 0/);
    await expectAppError(createSession(model, { memoryPattern: 'no' as never }), ErrorCode.VALIDATION, /'memoryPattern': expected a boolean, got "no"/);
  });

  it('hands the memory-pattern switch to ONNX Runtime', () => {
    expect(ortSessionOptions(resolveSessionConfig({}).resolved, []).enableMemPattern).toBe(true);
    expect(ortSessionOptions(resolveSessionConfig({ memoryPattern: false }).resolved, []).enableMemPattern).toBe(false);
    expect(ortSessionOptions(resolveSessionConfig({}).resolved, []).enableCpuMemArena).toBe(true);
    expect(ortSessionOptions(resolveSessionConfig({ cpuMemArena: false }).resolved, []).enableCpuMemArena).toBe(false);
    expect(() => resolveSessionConfig({ cpuMemArena: 'no' as unknown as boolean })).toThrow(/cpuMemArena.*a boolean/);
  });

  it('validates ORT session config entries: unknown keys and bad values name what was expected', async () => {
    const model = smallModel().toModel();
    await expectAppError(
      createSession(model, { sessionConfig: { 'session.disable_prepaking': '1' } as never }),
      ErrorCode.VALIDATION,
      /'sessionConfig': unknown key\(s\) 'session.disable_prepaking' \(expected one of session.disable_prepacking, /,
    );
    await expectAppError(createSession(model, { sessionConfig: { 'session.disable_prepacking': 'yes' as never } }), ErrorCode.VALIDATION, /'session.disable_prepacking': .*"0"\|"1".*, got "yes"/);
    await expectAppError(createSession(model, { sessionConfig: { 'session.disable_prepacking': 1 as never } }), ErrorCode.VALIDATION, /got 1/);
    await expectAppError(createSession(model, { graphOptimizationLevel: 'max' as never }), ErrorCode.VALIDATION, /'graphOptimizationLevel': expected 'disabled' \| 'basic' \| 'extended' \| 'all', got "max"/);
  });

  it('hands session config entries to ONNX Runtime (it checks the affinity count against the threads)', async () => {
    const model = smallModel().toModel();
    for (const mode of ['direct', 'worker'] as const) {
      // Two threads take one affinity (the caller's thread is the first); two affinities reach ORT and fail there.
      await expectAppError(createSession(model, { mode, intraOpThreads: 2, sessionConfig: { 'session.intra_op_thread_affinities': '1;2' } }), ErrorCode.RUNTIME, /Number of affinities does not equal/);
    }
    const session = await createSession(model, { mode: 'direct', graphOptimizationLevel: 'disabled', sessionConfig: { 'session.disable_prepacking': '1', 'session.set_denormal_as_zero': '1' } });
    expect(session.config.sessionConfig).toEqual({ 'session.disable_prepacking': '1', 'session.set_denormal_as_zero': '1' });
    const reference = await createSession(model, { mode: 'direct' });
    const [a, b] = [await session.run(feeds), await reference.run(feeds)];
    await session.close();
    await reference.close();
    expect(a.top!.data).toEqual(b.top!.data);
    expect(Array.from(a.y!.data as Float32Array).every((v, i) => Math.abs(v - (b.y!.data as Float32Array)[i]!) < 1e-5)).toBe(true);
  });

  it('creates sessions from a saved model file (external data beside it) in both modes', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'onnx-graph-file-'));
    try {
      const model = smallModel().toModel({ externalData: 'all' });
      expect(model.externalData.length).toBeGreaterThan(0);
      const file = await saveModel(model, join(dir, 'small.onnx'));
      expect(existsSync(join(dir, model.externalData[0]!.path))).toBe(true);
      const reference = await createSession(model, { mode: 'direct' });
      const direct = await createSession(file, { mode: 'direct', logSeverityLevel: 0 });
      const worker = await createSession(file, { mode: 'worker' });
      const [a, b, c] = [await reference.run(feeds), await direct.run(feeds), await worker.run(feeds)];
      expect(b.y!.data).toEqual(a.y!.data);
      expect(c.y!.data).toEqual(a.y!.data);
      expect(direct.placement?.placements[0]?.provider).toBe('CPUExecutionProvider');
      await expectAppError(worker.run({}), ErrorCode.VALIDATION, /missing input 'x'/); // the file source keeps the signature
      await Promise.all([reference.close(), direct.close(), worker.close()]);
      await expectAppError(createSession({ path: join(dir, 'missing.onnx') }, { mode: 'worker' }), ErrorCode.RUNTIME, /could not create a session/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('takes model bytes and external data on SharedArrayBuffers (shared with the worker, not copied)', async () => {
    const shared = (u: Uint8Array): Uint8Array => {
      const s = new Uint8Array(new SharedArrayBuffer(u.byteLength));
      s.set(u);
      return s;
    };
    const model = smallModel().toModel({ externalData: 'all' });
    const reference = await createSession(model, { mode: 'direct' });
    const expected = await reference.run(feeds);
    await reference.close();
    const source = { bytes: shared(encodeModel(model.proto)), externalData: model.externalData.map((f) => ({ path: f.path, data: shared(f.data) })), inputs: model.inputs };
    for (const mode of ['direct', 'worker'] as const) {
      const session = await createSession(source, { mode });
      expect((await session.run(feeds)).y!.data).toEqual(expected.y!.data);
      await session.close();
    }
  });

  const ortDir = dirname(createRequire(import.meta.url).resolve('onnxruntime-node'));
  const hasCuda = existsSync(join(ortDir, '..', 'bin', 'napi-v6', 'linux', 'x64', 'libonnxruntime_providers_cuda.so'));
  it.skipIf(hasCuda)('turns a provider that cannot load into a clear RUNTIME error (CUDA build absent)', async () => {
    for (const mode of ['direct', 'worker'] as const) {
      await expectAppError(createSession(smallModel().toModel(), { provider: 'cuda', mode }), ErrorCode.RUNTIME, /execution provider 'cuda' could not be loaded: .*ONNXRUNTIME_NODE_INSTALL=cuda12/);
    }
  });

  it('reports node placement when created with logSeverityLevel 0', async () => {
    const session = await createSession(smallModel().toModel(), { mode: 'direct', logSeverityLevel: 0 });
    await session.close();
    expect(session.placement?.placements[0]?.provider).toBe('CPUExecutionProvider');
    expect(session.placement?.placements[0]?.nodeCount).toBeGreaterThan(0);
    expect(session.placement?.cpuFallback).toEqual([]);
  });
});

describe('parsePlacementLog', () => {
  it('lists nodes per provider and the CPU fallbacks', () => {
    const log = [
      '2026-01-01 [V:onnxruntime:, session_state.cc:1377 VerifyEachNodeIsAssignedToAnEp] Node placements',
      '2026-01-01 [V:onnxruntime:, session_state.cc:1380 VerifyEachNodeIsAssignedToAnEp]  Node(s) placed on [WebGpuExecutionProvider]. Number of nodes: 2',
      '  MatMul (MatMul_3)',
      '  Softmax (Softmax_4)',
      '',
      '2026-01-01 [V:onnxruntime:, session_state.cc:1380 VerifyEachNodeIsAssignedToAnEp]  Node(s) placed on [CPUExecutionProvider]. Number of nodes: 1',
      '  LogSoftmax (LogSoftmax_5)',
      '2026-01-01 [I:onnxruntime:, inference_session.cc:1 Initialize] Session successfully initialized.',
    ].join('\n');
    const report = parsePlacementLog(log, 'webgpu');
    expect(report.placements.map((p) => [p.provider, p.nodeCount, p.nodes.length])).toEqual([
      ['WebGpuExecutionProvider', 2, 2],
      ['CPUExecutionProvider', 1, 1],
    ]);
    expect(report.cpuFallback).toEqual([{ opType: 'LogSoftmax', name: 'LogSoftmax_5' }]);
  });
});
