import { z } from 'zod';
import { PROVIDERS, probeExecutionProvider, type Provider } from '@sqlenv/onnx-graph';
import type { Logger } from '@sqlenv/shared';
import type { OptionSpec } from './command-io.ts';

/** Where the worker's and trainer's models run: `--execution-provider` / SQLENV_EXECUTION_PROVIDER. */
export const executionOptionSpecs: Record<string, OptionSpec> = {
  'execution-provider': { key: 'executionProvider', env: 'SQLENV_EXECUTION_PROVIDER' },
};

export const ExecutionOptionsSchema = z.object({
  /** ONNX Runtime execution provider for this process's model sessions. */
  executionProvider: z.enum(PROVIDERS).default('cpu'),
});

/**
 * The startup check of a process that runs models: probe the execution provider it was asked to
 * use and log what ONNX Runtime placed where, with the GPU this container claimed
 * (docker/gpu-entry.sh sets CUDA_VISIBLE_DEVICES). Throws (the command exits 1 with the reason)
 * when CUDA or WebGPU was asked for and cannot run: a GPU worker must never quietly run on the CPU.
 */
export async function checkExecutionProvider(provider: Provider, env: Record<string, string | undefined>, logger: Logger): Promise<void> {
  const report = await probeExecutionProvider(provider, { logger });
  logger.info(
    {
      executionProvider: provider,
      cudaVisibleDevices: env['CUDA_VISIBLE_DEVICES'] ?? null,
      placements: report.placement?.placements.map((p) => ({ provider: p.provider, nodes: p.nodeCount })) ?? null,
      probeMs: report.elapsedMs,
    },
    'model sessions will run on this execution provider',
  );
}
