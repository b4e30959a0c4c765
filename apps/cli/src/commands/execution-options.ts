import { availableParallelism } from 'node:os';
import { z } from 'zod';
import { PROVIDERS } from '@sqlenv/onnx-graph';
import { AppError, ErrorCode, formatZodIssues, type Logger } from '@sqlenv/shared';
import type { ModelExecution } from '@sqlenv/rollout';
import type { FlagSpec } from '../flags.ts';
import { executionFlagOptions } from '../execution-flag-options.ts';

/**
 * Where and with how many threads a process runs its model sessions: `--execution-provider` /
 * SQLENV_EXECUTION_PROVIDER, `--device-id` / SQLENV_DEVICE_ID, `--threads` / SQLENV_THREADS, and
 * whether the inference engine keeps ONNX Runtime's CPU memory arena, `--cpu-arena` / SQLENV_CPU_ARENA. Every
 * command that runs a model (eval, play, model, sft, learn, train, worker, trainer) reads these and
 * hands the same ModelExecution to every ONNX Runtime session it creates.
 */
export const executionOptionSpecs: Record<string, FlagSpec> = {
  'execution-provider': { ...executionFlagOptions['execution-provider'], key: 'executionProvider' },
  'device-id': { ...executionFlagOptions['device-id'], key: 'deviceId' },
  threads: { ...executionFlagOptions.threads, key: 'threads' },
  'cpu-arena': { ...executionFlagOptions['cpu-arena'], key: 'cpuArena' },
};

export const ExecutionOptionsSchema = z.object({
  /** ONNX Runtime execution provider for this process's model sessions. */
  executionProvider: z.enum(PROVIDERS).default('cpu'),
  /** GPU index (inside CUDA_VISIBLE_DEVICES) for 'cuda'. */
  deviceId: z.coerce.number().int().nonnegative().default(0),
  /**
   * ONNX Runtime intra-op threads of each session: the cores this process may use (the engine and
   * the learner take turns in a run, so each may use them all). Default: the machine's cores. More
   * than the cores is refused, not clamped: threads beyond them only contend, and a value that does
   * not fit the machine is a setting meant for another one (docs/cli.md, "Bounds").
   */
  threads: z.coerce.number().int().positive().max(availableParallelism(), `at most the ${availableParallelism()} cores of this machine (os.availableParallelism())`).default(availableParallelism()),
  /**
   * ONNX Runtime's CPU memory arena for this process's model sessions. On (the default) ran the
   * engine ~3× faster at Qwen3-0.6B shapes; off holds less memory between runs, for a worker short
   * of it (docs/inference.md, "Memory of a run").
   */
  cpuArena: z.enum(['on', 'off']).default('on'),
});
export type ExecutionOptions = z.infer<typeof ExecutionOptionsSchema>;

export function modelExecutionOf(options: ExecutionOptions): ModelExecution {
  return { provider: options.executionProvider, deviceId: options.deviceId, intraOpThreads: options.threads, interOpThreads: 1, cpuMemArena: options.cpuArena === 'on' };
}

/** The options that give `execution` back (`modelExecutionOf` inverted): what a command hands on to the phases it runs. */
export function executionOptionsOf(execution: ModelExecution): ExecutionOptions {
  return { executionProvider: execution.provider, deviceId: execution.deviceId, threads: execution.intraOpThreads, cpuArena: execution.cpuMemArena === false ? 'off' : 'on' };
}

/**
 * The ModelExecution of the flag texts of the CLI's eval, play, model and learn (parsed, with their
 * environment variables, by parseFlags; checked here, where ONNX Runtime's provider list is loaded):
 * a bad value is AppError VALIDATION naming the option.
 */
export function parseModelExecution(flags: { executionProvider?: string | undefined; deviceId?: string | undefined; threads?: string | undefined; cpuArena?: string | undefined }): ModelExecution {
  const raw = Object.fromEntries(Object.entries(flags).filter(([, value]) => value !== undefined));
  const parsed = ExecutionOptionsSchema.safeParse(raw);
  if (!parsed.success) throw new AppError(ErrorCode.VALIDATION, `invalid --execution-provider / --device-id / --threads / --cpu-arena (or SQLENV_EXECUTION_PROVIDER / SQLENV_DEVICE_ID / SQLENV_THREADS / SQLENV_CPU_ARENA): ${formatZodIssues(parsed.error)}`);
  return modelExecutionOf(parsed.data);
}

/**
 * The startup check of a process that runs models: probe the execution provider it was asked to
 * use and log what ONNX Runtime placed where, with the GPU this container claimed
 * (docker/gpu-entry.sh sets CUDA_VISIBLE_DEVICES). Throws (the command exits 1 with the reason)
 * when CUDA or WebGPU was asked for and cannot run: a GPU process must never quietly run on the CPU.
 */
export async function checkExecutionProvider(execution: ModelExecution, env: Record<string, string | undefined>, logger: Logger): Promise<void> {
  const { probeExecutionProvider } = await import('@sqlenv/onnx-graph');
  const report = await probeExecutionProvider(execution.provider, { logger, ...(execution.provider === 'cuda' ? { deviceId: execution.deviceId } : {}) });
  logger.info(
    {
      executionProvider: execution.provider,
      intraOpThreads: execution.intraOpThreads,
      cudaVisibleDevices: env['CUDA_VISIBLE_DEVICES'] ?? null,
      placements: report.placement?.placements.map((p) => ({ provider: p.provider, nodes: p.nodeCount })) ?? null,
      probeMs: report.elapsedMs,
    },
    'model sessions will run on this execution provider',
  );
}
