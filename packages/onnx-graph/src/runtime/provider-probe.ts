import { AppError, ErrorCode, silentLogger, type Logger } from '@sqlenv/shared';
import { Graph } from '../graph.ts';
import { tensor } from '../tensor-data.ts';
import type { PlacementReport } from './placement.ts';
import { createSession } from './session.ts';
import type { Provider } from './session-config.ts';

export interface ProviderProbeOptions {
  /** GPU index inside the process's CUDA_VISIBLE_DEVICES (default 0). */
  deviceId?: number;
  logger?: Logger;
}

export interface ProviderProbeReport {
  requested: Provider;
  /** Node placement of the probe graph (ONNX Runtime's own log, read back at verbose level). */
  placement: PlacementReport | undefined;
  /** Wall time to create the probe session and run it once, in milliseconds. */
  elapsedMs: number;
}

/**
 * A startup check for a process that will run its models on `provider`: create a small session
 * on it (MatMul, Softmax, ReduceSum: the kind of nodes the decoder graphs are made of), run it
 * once, and report where ONNX Runtime placed the nodes. Throws an AppError RUNTIME that says what
 * is missing when the provider cannot be loaded (the CUDA build of onnxruntime-node, CUDA 12 /
 * cuDNN 9 libraries, a visible GPU), and when any node of the probe fell back to the CPU: a
 * process asked to run on a GPU must not quietly run on the CPU instead.
 */
export async function probeExecutionProvider(provider: Provider, options: ProviderProbeOptions = {}): Promise<ProviderProbeReport> {
  const logger = (options.logger ?? silentLogger).child({ component: 'provider-probe' });
  const started = performance.now();
  const g = new Graph();
  const x = g.input('x', 'float32', [2, 8]); // (2, 8)
  const w = g.initializer('w', tensor('float32', [8, 4], Array.from({ length: 32 }, (_, i) => (i % 5) / 5))); // (8, 4)
  const probs = g.softmax(g.matMul(x, w), -1); // (2, 4)
  g.output('total', g.reduceSum(probs, undefined, { keepDims: false })); // ()
  const model = g.toModel();
  const device = options.deviceId === undefined ? {} : { deviceId: options.deviceId };
  // Off the CPU, createSession reads the node placement back from ORT's verbose log; a provider
  // that cannot load fails the creation itself, with its own reason.
  const session = await createSession(model, { provider, ...device, mode: 'direct', logger });
  try {
    const out = await session.run({ x: tensor('float32', [2, 8], Array.from({ length: 16 }, (_, i) => i / 16)) });
    const total = (out['total']?.data as Float32Array | undefined)?.[0];
    // Two rows of probabilities sum to 2: a provider that loads but computes garbage fails here.
    if (total === undefined || Math.abs(total - 2) > 1e-4) throw new AppError(ErrorCode.RUNTIME, `execution provider '${provider}' ran the probe graph but returned ${String(total)} instead of 2`);
    const placement = session.placement;
    if (placement && placement.cpuFallback.length > 0) {
      throw new AppError(ErrorCode.RUNTIME, `execution provider '${provider}' left ${placement.cpuFallback.length} probe node(s) on the CPU: ${placement.cpuFallback.map((n) => n.opType).join(', ')}`);
    }
    const report: ProviderProbeReport = { requested: provider, placement, elapsedMs: Math.round(performance.now() - started) };
    logger.info({ executionProvider: provider, placements: placement?.placements.map((p) => ({ provider: p.provider, nodes: p.nodeCount })) ?? [{ provider: 'CPUExecutionProvider' }], elapsedMs: report.elapsedMs }, 'execution provider ready');
    return report;
  } finally {
    await session.close();
  }
}
