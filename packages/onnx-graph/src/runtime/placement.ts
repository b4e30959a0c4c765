import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AppError, ErrorCode } from '@sqlenv/shared';
import type { InferenceSession } from 'onnxruntime-node';
import type { ExternalDataFile } from '../graph-core.ts';
import { writeModelFiles } from './model-files.ts';

/** Nodes one execution provider received, from ONNX Runtime's verbose "Node placements" log. */
export interface ProviderPlacement {
  /** e.g. 'CPUExecutionProvider', 'CUDAExecutionProvider', 'WebGpuExecutionProvider'. */
  provider: string;
  nodeCount: number;
  /** Listed by ORT only when several providers share the graph. */
  nodes: { opType: string; name: string }[];
}

export interface PlacementReport {
  placements: ProviderPlacement[];
  /** Nodes that ended up on the CPU provider although another provider was requested. */
  cpuFallback: { opType: string; name: string }[];
}

const CPU_EP = 'CPUExecutionProvider';

/**
 * Parse the "Node placements" block ORT logs at VERBOSE level
 * (onnxruntime/core/framework/session_state.cc, VerifyEachNodeIsAssignedToAnEp):
 *   " All nodes placed on [CPUExecutionProvider]. Number of nodes: 2"
 * or, per provider, " Node(s) placed on [X]. Number of nodes: N" followed by "  OpType (name)" lines.
 */
export function parsePlacementLog(log: string, requestedProvider: string): PlacementReport {
  const placements: ProviderPlacement[] = [];
  let current: ProviderPlacement | undefined;
  for (const line of log.split('\n')) {
    const header = /(?:All nodes|Node\(s\)) placed on \[([^\]]+)\]\. Number of nodes: (\d+)/.exec(line);
    if (header) {
      current = { provider: header[1] ?? '', nodeCount: Number(header[2]), nodes: [] };
      placements.push(current);
      continue;
    }
    const node = /^ {2}(\S+) \((.*)\)\s*$/.exec(line);
    if (node && current) current.nodes.push({ opType: node[1] ?? '', name: node[2] ?? '' });
    else if (!/^\s*$/.test(line)) current = undefined;
  }
  const cpuFallback = requestedProvider === 'cpu' ? [] : placements.filter((p) => p.provider === CPU_EP).flatMap((p) => p.nodes);
  return { placements, cpuFallback };
}

/**
 * ORT writes its log to the process's native stderr, which JS cannot read back.
 * So a short-lived child process creates the same session at VERBOSE level and
 * we parse its stderr. Costs one extra session creation; used only on request.
 */
export async function probePlacement(
  model: string | { bytes: Uint8Array; externalData: readonly ExternalDataFile[] },
  options: InferenceSession.SessionOptions,
  requestedProvider: string,
  timeoutMs = 60_000,
): Promise<PlacementReport> {
  const dir = await mkdtemp(join(tmpdir(), 'onnx-graph-placement-'));
  try {
    // A model file is read where it is; bytes are written out for the child.
    const modelPath = typeof model === 'string' ? model : join(dir, 'model.onnx');
    if (typeof model !== 'string') await writeModelFiles(modelPath, model.bytes, model.externalData);
    const { externalData: _inMemory, ...rest } = options;
    const probe = fileURLToPath(new URL('./placement-probe.mjs', import.meta.url));
    const stderr = await new Promise<string>((resolve, reject) => {
      const child = spawn(process.execPath, [probe, modelPath, JSON.stringify({ ...rest, logSeverityLevel: 0, logVerbosityLevel: 0 })], { stdio: ['ignore', 'ignore', 'pipe'] });
      let text = '';
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      child.stderr.setEncoding('utf8');
      child.stderr.on('data', (chunk: string) => (text += chunk));
      child.on('error', reject);
      child.on('close', (code) => {
        clearTimeout(timer);
        if (code === 0) resolve(text);
        else reject(new AppError(ErrorCode.RUNTIME, `placement probe exited with code ${String(code)}: ${text.split('\n').filter((l) => /error|fail/i.test(l)).slice(-1)[0] ?? ''}`));
      });
    });
    return parsePlacementLog(stderr, requestedProvider);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
