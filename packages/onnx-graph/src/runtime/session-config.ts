import { AppError, ErrorCode, silentLogger, type Logger } from '@sqlenv/shared';
import type { InferenceSession } from 'onnxruntime-node';
import { parseOrtConfigEntries, type OrtConfigEntries } from './ort-config-entries.ts';

export const PROVIDERS = ['cpu', 'cuda', 'webgpu'] as const;
export type Provider = (typeof PROVIDERS)[number];
export const RUN_MODES = ['worker', 'direct'] as const;
export type RunMode = (typeof RUN_MODES)[number];
export type LogSeverityLevel = 0 | 1 | 2 | 3 | 4;

export interface SessionConfig {
  /** Execution provider (default 'cpu'). 'cuda' needs the CUDA build of onnxruntime-node; 'webgpu' a Vulkan driver on Linux. */
  provider?: Provider;
  /** GPU index for 'cuda' (default 0). */
  deviceId?: number;
  /** Threads inside one op (default 1: several sessions must not oversubscribe the cores). */
  intraOpThreads?: number;
  /** Threads running independent nodes in parallel (default 1). */
  interOpThreads?: number;
  /** 'worker' (default): runs happen on a worker thread, the event loop never blocks; 'direct': on the calling thread. */
  mode?: RunMode;
  /**
   * ONNX Runtime log level, 0 = verbose ... 4 = fatal (default 3). At 0 the session also
   * records which execution provider each node was placed on (`session.placement`).
   */
  logSeverityLevel?: LogSeverityLevel;
  /** Graph optimisation level (default 'all'). */
  graphOptimizationLevel?: 'disabled' | 'basic' | 'extended' | 'all';
  /**
   * ONNX Runtime session config entries, e.g. `{ 'session.disable_prepacking': '1' }`
   * (one copy of big MatMul/Gemm weights instead of the original plus a pre-packed one).
   * Only known keys with valid values are accepted (`ORT_CONFIG_KEYS`); default none.
   */
  sessionConfig?: OrtConfigEntries;
  /**
   * ORT's memory pattern (default true): after a run, later runs with the same input shapes get one
   * block laid out for all intermediate tensors. On CPU the arena keeps the first run's chunks beside that
   * block, so a big graph's second run peaks far above its first (bench/results/train.md): training
   * sessions turn it off.
   */
  memoryPattern?: boolean;
  /**
   * ORT's CPU arena (default true): freed intermediate tensors go back to the arena, which keeps them
   * for later allocations and never returns them to the system. A run whose intermediates are
   * gigabytes (a Qwen3-0.6B-sized KV cache) then stays that much larger between runs; without the
   * arena they go back to the system allocator (docs/inference.md, "Memory of a run with a kept cache").
   */
  cpuMemArena?: boolean;
  logger?: Logger;
}

/** SessionConfig with every default applied (defaults live only here). */
export interface ResolvedSessionConfig {
  provider: Provider;
  deviceId: number;
  intraOpThreads: number;
  interOpThreads: number;
  mode: RunMode;
  logSeverityLevel: LogSeverityLevel;
  graphOptimizationLevel: 'disabled' | 'basic' | 'extended' | 'all';
  sessionConfig: OrtConfigEntries;
  memoryPattern: boolean;
  cpuMemArena: boolean;
}

const DEFAULTS: ResolvedSessionConfig = {
  provider: 'cpu',
  deviceId: 0,
  intraOpThreads: 1,
  interOpThreads: 1,
  mode: 'worker',
  logSeverityLevel: 3,
  graphOptimizationLevel: 'all',
  sessionConfig: {},
  memoryPattern: true,
  cpuMemArena: true,
};

function invalid(field: string, expected: string, got: unknown): AppError {
  return new AppError(ErrorCode.VALIDATION, `session config '${field}': expected ${expected}, got ${JSON.stringify(got)}`, { details: { field } });
}

/** Validate and fill defaults; unknown providers and bad counts fail fast naming what was expected. */
export function resolveSessionConfig(config: SessionConfig): { resolved: ResolvedSessionConfig; logger: Logger } {
  const r = { ...DEFAULTS };
  const { logger, ...rest } = config;
  for (const [key, value] of Object.entries(rest)) {
    if (value === undefined) continue;
    switch (key) {
      case 'provider':
        if (!(PROVIDERS as readonly unknown[]).includes(value)) throw invalid(key, PROVIDERS.join(' | '), value);
        r.provider = value as Provider;
        break;
      case 'mode':
        if (!(RUN_MODES as readonly unknown[]).includes(value)) throw invalid(key, RUN_MODES.join(' | '), value);
        r.mode = value as RunMode;
        break;
      case 'deviceId':
      case 'intraOpThreads':
      case 'interOpThreads': {
        const min = key === 'deviceId' ? 0 : 1;
        if (typeof value !== 'number' || !Number.isInteger(value) || value < min) throw invalid(key, `an integer >= ${min}`, value);
        r[key] = value;
        break;
      }
      case 'logSeverityLevel':
        if (![0, 1, 2, 3, 4].includes(value as number)) throw invalid(key, '0 | 1 | 2 | 3 | 4', value);
        r.logSeverityLevel = value as LogSeverityLevel;
        break;
      case 'graphOptimizationLevel':
        if (!['disabled', 'basic', 'extended', 'all'].includes(value as string)) throw invalid(key, "'disabled' | 'basic' | 'extended' | 'all'", value);
        r.graphOptimizationLevel = value as ResolvedSessionConfig['graphOptimizationLevel'];
        break;
      case 'sessionConfig':
        r.sessionConfig = parseOrtConfigEntries(value);
        break;
      case 'memoryPattern':
      case 'cpuMemArena':
        if (typeof value !== 'boolean') throw invalid(key, 'a boolean', value);
        r[key] = value;
        break;
      default:
        throw invalid(key, `one of provider, deviceId, intraOpThreads, interOpThreads, mode, logSeverityLevel, graphOptimizationLevel, sessionConfig, memoryPattern, cpuMemArena, logger`, key);
    }
  }
  return { resolved: r, logger: logger ?? silentLogger };
}

/** onnxruntime-node session options for a resolved config (plain data: it crosses to worker threads). */
export function ortSessionOptions(c: ResolvedSessionConfig, externalData: readonly { path: string; data: Uint8Array }[]): InferenceSession.SessionOptions {
  const ep: InferenceSession.ExecutionProviderConfig =
    c.provider === 'cuda' ? { name: 'cuda', deviceId: c.deviceId } : c.provider === 'webgpu' ? 'webgpu' : 'cpu';
  return {
    executionProviders: [ep],
    intraOpNumThreads: c.intraOpThreads,
    interOpNumThreads: c.interOpThreads,
    logSeverityLevel: c.logSeverityLevel,
    graphOptimizationLevel: c.graphOptimizationLevel,
    enableMemPattern: c.memoryPattern,
    enableCpuMemArena: c.cpuMemArena,
    // The Node binding turns `extra` into session config entries; dotted keys pass through as they are.
    ...(Object.keys(c.sessionConfig).length > 0 ? { extra: { ...c.sessionConfig } } : {}),
    ...(externalData.length > 0 ? { externalData: externalData.map((f) => ({ path: f.path, data: f.data })) } : {}),
  };
}

/** Turn a session-creation failure into an AppError that says which provider failed and why. */
export function sessionCreateError(c: ResolvedSessionConfig, cause: unknown): AppError {
  const message = cause instanceof Error ? cause.message : String(cause);
  const providerProblem = /provider|shared library|adapter|backend|cuda|webgpu|dawn|vulkan/i.test(message) && c.provider !== 'cpu';
  const hint =
    c.provider === 'cuda'
      ? ' (the CUDA provider needs onnxruntime-node installed with ONNXRUNTIME_NODE_INSTALL=cuda12, CUDA 12 and cuDNN 9 on the library path)'
      : c.provider === 'webgpu'
        ? ' (WebGPU on Linux needs libvulkan.so.1 and a Vulkan driver)'
        : '';
  const text = providerProblem
    ? `execution provider '${c.provider}' could not be loaded: ${firstLine(message)}${hint}`
    : `ONNX Runtime could not create a session on '${c.provider}': ${firstLine(message)}`;
  return new AppError(ErrorCode.RUNTIME, text, { cause, details: { provider: c.provider } });
}

function firstLine(s: string): string {
  return s.split('\n')[0] ?? s;
}
