import { z } from 'zod';
import type { FlagSpec } from './flags.ts';

/**
 * `--execution-provider cpu|cuda|webgpu`, `--device-id D`, `--threads N`, `--cpu-arena on|off` of the
 * commands that run a model here (eval, play, model, learn); each falls back to its environment
 * variable (SQLENV_EXECUTION_PROVIDER, SQLENV_DEVICE_ID, SQLENV_THREADS, SQLENV_CPU_ARENA) in parseFlags. The values are checked, and the
 * defaults applied, by ExecutionOptionsSchema (commands/execution-options.ts, which loads ONNX
 * Runtime's provider list: imported only when needed). A leaf module: execution-options.ts reads these
 * specs and execution-flags.ts loads execution-options.ts lazily, so the two never import each other.
 */
export const executionFlagOptions = {
  'execution-provider': { type: 'string', env: 'SQLENV_EXECUTION_PROVIDER' },
  'device-id': { type: 'string', env: 'SQLENV_DEVICE_ID' },
  threads: { type: 'string', env: 'SQLENV_THREADS' },
  'cpu-arena': { type: 'string', env: 'SQLENV_CPU_ARENA' },
} satisfies Record<string, FlagSpec>;

export const ExecutionFlags = z.object({
  'execution-provider': z.string().min(1).optional(),
  'device-id': z.string().min(1).optional(),
  threads: z.string().min(1).optional(),
  'cpu-arena': z.string().min(1).optional(),
});
export type ExecutionFlags = z.infer<typeof ExecutionFlags>;

export const executionUsage = '[--execution-provider cpu|cuda|webgpu] [--device-id D] [--threads N] [--cpu-arena on|off]';
