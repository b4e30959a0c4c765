import type { ModelExecution } from '@sqlenv/rollout';
import type { Logger } from '@sqlenv/shared';
import type { ExecutionFlags } from './execution-flag-options.ts';

export { ExecutionFlags, executionFlagOptions, executionUsage } from './execution-flag-options.ts';

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
