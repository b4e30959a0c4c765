import { z } from 'zod';
import type { ModelExecution } from '@sqlenv/rollout';
import type { Logger } from '@sqlenv/shared';
import type { FlagSpec } from './flags.ts';

/**
 * `--execution-provider cpu|cuda|webgpu`, `--device-id D`, `--threads N`, `--cpu-arena on|off` of the
 * commands that run a model here (eval, play, model, learn); each falls back to its environment
 * variable (SQLENV_EXECUTION_PROVIDER, SQLENV_DEVICE_ID, SQLENV_THREADS, SQLENV_CPU_ARENA) in parseFlags. The values are checked, and the
 * defaults applied, by ExecutionOptionsSchema (commands/execution-options.ts, which loads ONNX
 * Runtime's provider list: imported only when needed).
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

/**
 * The settings every model session of this command gets. `runsModel` false (a baseline policy):
 * nothing is loaded unless a GPU was asked for, which is then still checked, so a command told to
 * use a GPU never exits 0 without one. A GPU that cannot run fails here, at start, with the reason.
 */
export async function startExecution(flags: ExecutionFlags, env: Record<string, string | undefined>, logger: Logger, runsModel: true): Promise<ModelExecution>;
export async function startExecution(flags: ExecutionFlags, env: Record<string, string | undefined>, logger: Logger, runsModel: boolean): Promise<ModelExecution | undefined>;
export async function startExecution(flags: ExecutionFlags, env: Record<string, string | undefined>, logger: Logger, runsModel: boolean): Promise<ModelExecution | undefined> {
  const provider = flags['execution-provider'];
  if (!runsModel && (provider === undefined || provider === 'cpu')) return undefined;
  const { checkExecutionProvider, parseModelExecution } = await import('./commands/execution-options.ts');
  const execution = parseModelExecution({ executionProvider: flags['execution-provider'], deviceId: flags['device-id'], threads: flags.threads, cpuArena: flags['cpu-arena'] });
  if (execution.provider !== 'cpu') await checkExecutionProvider(execution, env, logger);
  return execution;
}
