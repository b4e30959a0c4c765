import { mkdirSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { z } from 'zod';
import type { SftJobOptions } from '@sqlenv/grpo';
import { acquireLock } from '@sqlenv/runs';
import { createRootLogger } from '@sqlenv/shared';
import { parseFlags, printUsage, wantsHelp, type FlagSpec } from '../flags.ts';
import { reportCommandError, type CommandIo } from '../io.ts';
import { checkExecutionProvider, ExecutionOptionsSchema, executionOptionSpecs, modelExecutionOf } from './execution-options.ts';
import { sftUsage } from './usage.ts';

export const sftOptionSpecs: Record<string, FlagSpec> = {
  model: { key: 'model' },
  'adapter-init': { key: 'adapterInit' },
  data: { key: 'data' },
  steps: { key: 'steps' },
  lr: { key: 'learningRate' },
  schedule: { key: 'schedule' },
  'warmup-steps': { key: 'warmupSteps' },
  'min-lr-ratio': { key: 'minLrRatio' },
  'weight-decay': { key: 'weightDecay' },
  optimizer: { key: 'optimizer' },
  'batch-size': { key: 'batchSize' },
  'lora-rank': { key: 'loraRank' },
  'lora-alpha': { key: 'loraAlpha' },
  'lora-targets': { key: 'loraTargets' },
  'micro-batch-tokens': { key: 'microBatchTokens' },
  seed: { key: 'seed' },
  thinking: { key: 'thinking', type: 'boolean' },
  full: { key: 'full', type: 'boolean' },
  shuffle: { key: 'shuffle', type: 'boolean' },
  'checkpoint-every': { key: 'checkpointEvery' },
  resume: { key: 'resume', type: 'boolean' },
  force: { key: 'force', type: 'boolean' },
  'eval-data': { key: 'evalData' },
  'eval-every': { key: 'evalEvery' },
  out: { key: 'out' },
  ...executionOptionSpecs,
};

const num = z.coerce.number();

/** `sqlenv sft` options and their defaults (what each means: SftJobOptions of @sqlenv/grpo; learner settings not listed keep LearnerConfigSchema's). */
export const SftOptionsSchema = z.object({
  model: z.string().min(1),
  /** A PEFT adapter directory to start from; its r, lora_alpha and target_modules are the adapter's shape. */
  adapterInit: z.string().min(1).optional(),
  data: z.string().min(1),
  steps: num.int().positive(),
  /**
   * Learning rate (constant). 1e-4 is the usual order for LoRA SFT on 0.5–2B models
   * (PEFT's examples use 1e-4 to 2e-4; full fine-tuning uses ~1e-5).
   */
  learningRate: num.positive().default(1e-4),
  /** constant, or cosine decay over --steps to --min-lr-ratio × --lr (after --warmup-steps of linear warm-up). */
  schedule: z.enum(['constant', 'cosine']).default('constant'),
  warmupSteps: num.int().nonnegative().default(0),
  minLrRatio: num.min(0).max(1).default(0),
  /** AdamW's decoupled weight decay. */
  weightDecay: num.nonnegative().default(0),
  /** adamw (gradients clipped to global norm 1) or sgd: p ← p − lr·grad, nothing else. */
  optimizer: z.enum(['adamw', 'sgd']).default('adamw'),
  batchSize: num.int().positive().default(8),
  loraRank: num.int().positive().optional(),
  loraAlpha: num.positive().optional(),
  /** Comma-separated projection names. */
  loraTargets: z.string().optional(),
  microBatchTokens: num.int().positive().optional(),
  /** Seed of the adapter's initialisation when there is no --adapter-init. */
  seed: num.int().default(0),
  /** Render messages lines with Qwen3's thinking mode (no empty think block in the generation prompt), as `sft-data --thinking` does. */
  thinking: z.boolean().default(false),
  /**
   * Train every base weight instead of a LoRA adapter and write a whole model directory to --out
   * (config, weights, tokenizer files): SFT or pretraining of a small model that starts from random
   * weights, whose frozen random embedding an adapter cannot reshape. Small models only.
   */
  full: z.boolean().default(false),
  /** Visit the data lines in a new order every epoch, drawn from --seed (default: file order, wrapping around). */
  shuffle: z.boolean().default(false),
  /**
   * Write the run's whole state (trained tensors, AdamW moments, step) to OUT/checkpoint/ every this
   * many steps and after the last, with a loadable model (full) or adapter directory beside it, so a
   * long run can be stopped and continued (`--resume`) and evaluated while it runs. Default: none.
   */
  checkpointEvery: num.int().positive().optional(),
  /**
   * Continue from OUT/checkpoint/: the steps after the checkpoint's, on the batches they would have
   * had. The options that decide batches and updates (data, batch size, seed, shuffle, learning-rate
   * schedule — with cosine, --steps too —, optimizer, what is trained) must be the ones the checkpoint
   * was written with; a constant-rate run may be continued to a larger --steps.
   */
  resume: z.boolean().default(false),
  /** Replace a non-empty --out directory (an existing adapter or model) whole. Never allowed over --model or --adapter-init. */
  force: z.boolean().default(false),
  /** Held-out lines (same formats as --data) whose loss is printed as `{"eval_step", "eval_loss"}` lines. */
  evalData: z.string().min(1).optional(),
  /** Measure the --eval-data loss every this many steps (and before the first and after the last). */
  evalEvery: num.int().positive().optional(),
  out: z.string().min(1),
}).extend(ExecutionOptionsSchema.shape);
export type SftOptions = z.infer<typeof SftOptionsSchema>;

/** The SFT job of parsed options: the execution flags become the session's settings. */
export function sftJobOptions(options: SftOptions): SftJobOptions {
  const { executionProvider: _provider, deviceId: _device, threads: _threads, cpuArena: _arena, ...job } = options;
  return { ...job, execution: modelExecutionOf(options) };
}

/**
 * `sqlenv sft`: supervised fine-tuning of a LoRA adapter on assistant tokens (the warm start before
 * GRPO). One JSON line per step on stdout (`{"step", "loss", "lr", "grad_norm", "tokens", "lines",
 * "micro_batches", "ms"}`), then a summary line (`{"done": true, …}`); the adapter is written to
 * --out as a PEFT directory (adapter_config.json + adapter_model.safetensors).
 */
export async function sftCommand(argv: readonly string[], io: CommandIo): Promise<number> {
  if (wantsHelp(argv)) return printUsage(io, sftUsage);
  try {
    const options = parseFlags(argv, sftOptionSpecs, SftOptionsSchema, { env: io.env ?? {} }).flags;
    // One sft per --out at a time: a second one (or a learn's) is refused while the first runs.
    const release = lockOutput(options.out);
    try {
      return await sft(options, io);
    } finally {
      release();
    }
  } catch (error) {
    return reportCommandError(io, 'sft', error);
  }
}

/** The lock of an --out directory: a hidden file beside it (the directory itself is replaced whole at the end). */
export function sftOutputLock(out: string): string {
  const path = resolve(out);
  return join(dirname(path), `.${basename(path)}.lock`);
}

function lockOutput(out: string): () => void {
  mkdirSync(dirname(resolve(out)), { recursive: true });
  return acquireLock(sftOutputLock(out), 'sft', `--out ${out}`);
}

async function sft(options: SftOptions, io: CommandIo): Promise<number> {
  const logger = io.logger ?? createRootLogger('sft', { fd: 2, level: 'warn' });
  const job = sftJobOptions(options);
  // Asked for a GPU: refuse at once, with the reason, when it cannot run (never train on the CPU instead).
  if (job.execution?.provider !== 'cpu') await checkExecutionProvider(modelExecutionOf(options), {}, logger);
  const { runSftJob } = await import('@sqlenv/grpo');
  await runSftJob(job, io, { logger, ...(io.signal === undefined ? {} : { signal: io.signal }) });
  return 0;
}
