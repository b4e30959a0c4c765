import * as ort from 'onnxruntime-node';
import { AppError, ErrorCode, startRpcWorker, toAppError, WorkerRpc, type Logger } from '@sqlenv/shared';
import type { BuiltModel, ValueSpec } from '../graph-core.ts';
import type { TensorData } from '../tensor-data.ts';
import { modelBytes, type ModelFile, type ModelSource } from './model-files.ts';
import { checkFeeds, ortModelArg, runOrt } from './ort-convert.ts';
import { probePlacement, type PlacementReport } from './placement.ts';
import { ortSessionOptions, resolveSessionConfig, sessionCreateError, type ResolvedSessionConfig, type SessionConfig } from './session-config.ts';
import type { WorkerReply, WorkerRequest, WorkerSetup } from './session-worker.ts';

export type { ModelFile, ModelSource } from './model-files.ts';

export interface RunOptions<K extends string = string> {
  /** Fetch only these outputs (default: all). */
  outputs?: readonly K[];
}

export type Feeds = Readonly<Record<string, TensorData>>;

export interface GraphSession {
  readonly inputNames: readonly string[];
  readonly outputNames: readonly string[];
  readonly config: ResolvedSessionConfig;
  /** Node placement per execution provider; present off the CPU and when created with logSeverityLevel 0. */
  readonly placement: PlacementReport | undefined;
  run<K extends string = string>(feeds: Feeds, options?: RunOptions<K>): Promise<Record<K, TensorData>>;
  /** Release the session (and its worker thread). Idempotent. */
  close(): Promise<void>;
}

/** What a session is created from: the model file's path, or its bytes (external data goes in the options). */
interface Loadable {
  model: string | Uint8Array;
  inputs: readonly ValueSpec[] | undefined;
}

/**
 * Create an ONNX Runtime session from a built graph, encoded bytes or a model
 * file. In 'worker' mode (the default) the session lives on its own worker
 * thread: session creation and every run happen there, so the caller's event
 * loop keeps turning. Memory in worker mode: a `ModelFile` is opened by the
 * worker (the bytes never pass through this thread); external data backed by a
 * SharedArrayBuffer is shared with the worker, not copied; anything else is
 * copied to the worker once.
 */
export async function createSession(model: BuiltModel | ModelSource | ModelFile, config: SessionConfig = {}): Promise<GraphSession> {
  const { resolved, logger } = resolveSessionConfig(config);
  const source = 'path' in model ? model : modelBytes(model);
  const externalData = 'bytes' in source ? (source.externalData ?? []) : [];
  const options = ortSessionOptions(resolved, externalData);
  const loadable: Loadable = { model: 'bytes' in source ? source.bytes : source.path, inputs: source.inputs };
  const log = logger.child({ component: 'onnx-graph', provider: resolved.provider, mode: resolved.mode });
  // The session first: when the provider cannot be loaded, its own error says what is missing.
  const session = resolved.mode === 'direct' ? await DirectSession.create(loadable, options, resolved) : await WorkerSession.create(loadable, options, resolved, log);
  // Off the CPU, ORT's verbose log says which nodes it placed where (read back through a child
  // process that creates the same session once more): a GPU session must show it runs on the GPU.
  // The CPU provider has a kernel for every node it accepts, so there the answer is known.
  if (resolved.logSeverityLevel === 0 || resolved.provider !== 'cpu') {
    try {
      session.placement = await probePlacement('bytes' in source ? { bytes: source.bytes, externalData } : source.path, options, resolved.provider);
    } catch (error) {
      await session.close();
      throw error;
    }
    if (session.placement.cpuFallback.length > 0) log.warn({ nodes: session.placement.cpuFallback.map((n) => n.opType) }, 'nodes fell back to CPU');
  }
  log.info(sessionRecord(session), 'session created');
  return session;
}

/** What `session created` logs: where the session runs and with how many threads, and the node placement. */
export function sessionRecord(session: Pick<GraphSession, 'config' | 'placement' | 'inputNames' | 'outputNames'>): Record<string, unknown> {
  const c = session.config;
  return {
    executionProvider: c.provider,
    ...(c.provider === 'cuda' ? { deviceId: c.deviceId } : {}),
    intraOpThreads: c.intraOpThreads,
    interOpThreads: c.interOpThreads,
    graphOptimizationLevel: c.graphOptimizationLevel,
    cpuMemArena: c.cpuMemArena,
    placement: session.placement?.placements.map((p) => ({ provider: p.provider, nodes: p.nodeCount })) ?? (c.provider === 'cpu' ? [{ provider: 'CPUExecutionProvider', nodes: 'all' }] : null),
    inputs: session.inputNames.length,
    outputs: session.outputNames.length,
  };
}

class DirectSession implements GraphSession {
  private closed = false;
  placement: PlacementReport | undefined;

  private constructor(
    private readonly session: ort.InferenceSession,
    private readonly inputs: readonly ValueSpec[] | undefined,
    readonly config: ResolvedSessionConfig,
  ) {}

  static async create(source: Loadable, options: ort.InferenceSession.SessionOptions, config: ResolvedSessionConfig): Promise<DirectSession> {
    try {
      const model = ortModelArg(source.model);
      // Two overloads (path, bytes): TypeScript does not pick one for the union.
      const session = typeof model === 'string' ? await ort.InferenceSession.create(model, options) : await ort.InferenceSession.create(model, options);
      return new DirectSession(session, source.inputs, config);
    } catch (error) {
      throw sessionCreateError(config, error);
    }
  }

  get inputNames(): readonly string[] {
    return this.session.inputNames;
  }
  get outputNames(): readonly string[] {
    return this.session.outputNames;
  }

  async run<K extends string = string>(feeds: Feeds, options: RunOptions<K> = {}): Promise<Record<K, TensorData>> {
    if (this.closed) throw new AppError(ErrorCode.RUNTIME, 'run: the session is closed');
    checkFeeds(feeds, this.inputs);
    return runOrt(this.session, feeds, options.outputs) as Record<K, TensorData>;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.session.release();
  }
}

class WorkerSession implements GraphSession {
  placement: PlacementReport | undefined;

  private constructor(
    private readonly rpc: WorkerRpc<WorkerRequest, WorkerReply>,
    readonly inputNames: readonly string[],
    readonly outputNames: readonly string[],
    private readonly inputs: readonly ValueSpec[] | undefined,
    readonly config: ResolvedSessionConfig,
  ) {}

  static async create(source: Loadable, options: ort.InferenceSession.SessionOptions, config: ResolvedSessionConfig, log: Logger): Promise<WorkerSession> {
    // Structured clone: plain buffers are copied, SharedArrayBuffers shared, a path is just a string.
    const setup: WorkerSetup = { model: source.model, options };
    const { worker, ready } = await startRpcWorker(new URL('./session-worker.ts', import.meta.url), setup, 'session worker', (message) => {
      const reply = message as WorkerReply;
      if (reply.type === 'ready') return reply;
      if (reply.type === 'init-error') throw sessionCreateError(config, new Error(reply.message));
      throw new AppError(ErrorCode.INTERNAL, `session worker: expected 'ready', got '${reply.type}'`);
    });
    const rpc = new WorkerRpc<WorkerRequest, WorkerReply>(worker, {
      name: 'session worker',
      replyId: (reply) => (reply.type === 'result' || reply.type === 'run-error' ? reply.id : undefined),
      replyError: (reply) => (reply.type === 'run-error' ? new AppError(ErrorCode.RUNTIME, reply.message) : undefined),
      logger: log,
    });
    return new WorkerSession(rpc, ready.inputNames, ready.outputNames, source.inputs, config);
  }

  async run<K extends string = string>(feeds: Feeds, options: RunOptions<K> = {}): Promise<Record<K, TensorData>> {
    if (this.rpc.closed) throw new AppError(ErrorCode.RUNTIME, 'run: the session is closed');
    const crashed = this.rpc.crashed;
    if (crashed !== undefined) throw crashed;
    try {
      checkFeeds(feeds, this.inputs);
    } catch (error) {
      throw toAppError(error);
    }
    // Feeds are copied (structured clone): the caller keeps its buffers.
    const reply = await this.rpc.call((id) => ({ type: 'run', id, feeds, ...(options.outputs ? { outputs: [...options.outputs] } : {}) }));
    if (reply.type !== 'result') throw new AppError(ErrorCode.INTERNAL, `session worker: expected 'result', got '${reply.type}'`);
    return reply.outputs as Record<K, TensorData>;
  }

  async close(): Promise<void> {
    await this.rpc.close('session closed while a run was pending');
  }
}
