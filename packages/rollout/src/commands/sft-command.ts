import { copyFileSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { AppError, checkDirOutput, checkOutputNotInput, ErrorCode, writeDirAtomic } from '@sqlenv/shared';
import type { LoraConfig, ModelConfig } from '@sqlenv/model';
import type * as ModelModule from '@sqlenv/model';
import type { SftStepReport } from '@sqlenv/grpo';
import { readOptions, reportCommandError, type OptionSpec, type RolloutCommandIo } from './command-io.ts';

export const sftUsage = `sqlenv sft --model DIR --data F.jsonl --steps N --out DIR [--adapter-init DIR] [--lr X] [--optimizer adamw|sgd]
            [--schedule constant|cosine] [--warmup-steps W] [--min-lr-ratio R] [--weight-decay D]
            [--batch-size B] [--lora-rank R] [--lora-alpha A] [--lora-targets q_proj,...] [--micro-batch-tokens T] [--seed S] [--thinking]
            [--shuffle] [--full]   (every base weight instead of an adapter; --out is then a model directory) [--force]`;

const sftOptionSpecs: Record<string, OptionSpec> = {
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
  thinking: { key: 'thinking', flag: true },
  full: { key: 'full', flag: true },
  shuffle: { key: 'shuffle', flag: true },
  out: { key: 'out' },
  force: { key: 'force', flag: true },
};

const num = z.coerce.number();

/** `sqlenv sft` options; the defaults live here (learner settings not listed keep LearnerConfigSchema's). */
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
  out: z.string().min(1),
  /** Replace a non-empty --out directory (an existing adapter or model) whole. Never allowed over --model or --adapter-init. */
  force: z.boolean().default(false),
});
export type SftOptions = z.infer<typeof SftOptionsSchema>;

export interface SftSummary {
  steps: number;
  examples: number;
  firstLoss: number;
  lastLoss: number;
  out: string;
  lora: LoraConfig;
}

/**
 * `sqlenv sft`: supervised fine-tuning of a LoRA adapter on assistant tokens (the warm start before
 * GRPO). One JSON line per step on stdout (`{"step", "loss", "lr", "grad_norm", "tokens", "lines",
 * "micro_batches", "ms"}`), then a summary line (`{"done": true, …}`); the adapter is written to
 * --out as a PEFT directory (adapter_config.json + adapter_model.safetensors).
 */
export async function sftCommand(argv: readonly string[], io: RolloutCommandIo): Promise<number> {
  try {
    const options = readOptions(argv, {}, sftOptionSpecs, SftOptionsSchema);
    await runSftCommand(options, io, io.signal === undefined ? {} : { signal: io.signal });
    return 0;
  } catch (error) {
    return reportCommandError(io, 'sft', error);
  }
}

/**
 * What `sqlenv sft` does, for callers in the same process: `signal` stops it between steps, `onStep`
 * sees every step's report (after its JSON line is written to `io.stdout`).
 */
export async function runSftCommand(
  options: SftOptions,
  io: Pick<RolloutCommandIo, 'stdout'>,
  { signal, onStep }: { signal?: AbortSignal; onStep?: (report: SftStepReport) => void } = {},
): Promise<SftSummary> {
  const model = await import('@sqlenv/model');
  const grpo = await import('@sqlenv/grpo');
  if (options.full && (options.adapterInit !== undefined || options.loraRank !== undefined || options.loraAlpha !== undefined || options.loraTargets !== undefined)) {
    throw new AppError(ErrorCode.VALIDATION, '--full trains the base weights: --adapter-init and --lora-* do not apply');
  }
  // The output is checked before minutes of training: never over an input, never over another output without --force.
  checkOutputNotInput({ label: '--out', path: options.out }, [
    { label: '--model', path: options.model },
    { label: '--adapter-init', path: options.adapterInit },
    { label: '--data', path: options.data },
  ]);
  checkDirOutput(options.out, { force: options.force, label: '--out' });
  const config = model.readModelConfig(options.model);
  const init = options.adapterInit === undefined ? undefined : model.loadAdapterDir(options.adapterInit, config);
  const lora = loraOf(options, init?.lora, model.parseLoraConfig);
  checkSftFits(options, config, lora, model);
  const weights = model.loadModelWeights(options.model, config);
  let text: string;
  try {
    text = readFileSync(options.data, 'utf8');
  } catch (cause) {
    throw new AppError(ErrorCode.VALIDATION, `cannot read --data ${options.data}`, { cause });
  }
  const examples = await grpo.readSftExamples(text, { config, source: options.data, loadChat: () => model.loadChatFormat(options.model, { thinking: options.thinking, config }) });
  const learnerConfig = grpo.parseLearnerConfig({
    optimizer: {
      kind: options.optimizer,
      learningRate: options.learningRate,
      schedule: options.schedule,
      warmupSteps: options.warmupSteps,
      minLrRatio: options.minLrRatio,
      weightDecay: options.weightDecay,
      ...(options.schedule === 'cosine' ? { totalSteps: options.steps } : {}),
    },
    ...(options.microBatchTokens === undefined ? {} : { microBatchTokens: options.microBatchTokens }),
  });
  const { adapter, weights: trained, reports } = await grpo.runSft({
    modelConfig: config,
    weights,
    lora,
    parameters: options.full ? 'full' : 'lora',
    config: learnerConfig,
    examples,
    steps: options.steps,
    batchSize: options.batchSize,
    seed: options.seed,
    shuffle: options.shuffle,
    ...(signal === undefined ? {} : { signal }),
    ...(init === undefined ? {} : { init: init.weights }),
    onStep: (r) => {
      io.stdout.write(
        `${JSON.stringify({ step: r.step, loss: r.loss, lr: r.learningRate, grad_norm: r.gradNorm, tokens: r.lossTokens, lines: r.lines, micro_batches: r.microBatches, ms: Math.round(r.ms) })}\n`,
      );
      onStep?.(r);
    },
  });
  const files =
    trained !== null
      ? writeModelDir(options.model, options.out, trained, weights, model.writeSafetensorsCheckpoint, options.force)
      : model.saveAdapterDir(options.out, config, adapter as NonNullable<typeof adapter>, { baseModel: options.model, force: options.force, label: '--out' });
  const summary: SftSummary = {
    steps: reports.length,
    examples: examples.length,
    firstLoss: (reports[0] as (typeof reports)[number]).loss,
    lastLoss: (reports.at(-1) as (typeof reports)[number]).loss,
    out: options.out,
    lora,
  };
  io.stdout.write(
    `${JSON.stringify({ done: true, steps: summary.steps, examples: summary.examples, first_loss: summary.firstLoss, last_loss: summary.lastLoss, out: options.out, files, lora: { r: lora.rank, lora_alpha: lora.alpha, target_modules: lora.targets } })}\n`,
  );
  return summary;
}

/**
 * A trained model as a model directory: the source directory's files that are not weights (config,
 * tokenizer, chat template, generation settings) copied, and the trained tensors as model.safetensors.
 */
function writeModelDir(
  source: string,
  out: string,
  trained: ReadonlyMap<string, Float32Array>,
  base: ReadonlyMap<string, { shape: number[] }>,
  write: (dir: string, tensors: { name: string; shape: number[]; data: Float32Array }[]) => unknown,
  force: boolean,
): string[] {
  const copied = readdirSync(source).filter((f) => !f.endsWith('.safetensors') && f !== 'model.safetensors.index.json' && statSync(join(source, f)).isFile());
  // Built whole under a temporary sibling and renamed: no mix of an old model's files and new weights.
  writeDirAtomic(
    out,
    (dir) => {
      for (const f of copied) copyFileSync(join(source, f), join(dir, f));
      write(dir, [...trained].map(([name, data]) => ({ name, shape: (base.get(name) as { shape: number[] }).shape, data })));
    },
    { force, label: '--out' },
  );
  return [...copied, 'model.safetensors'].sort();
}

/**
 * Refuse, before any weight is read, a LoRA rank the model's projections cannot hold and a run
 * whose weights, trained copies (gradients + AdamW moments) and activations exceed this machine's
 * memory, with the numbers.
 */
function checkSftFits(options: SftOptions, config: ModelConfig, lora: LoraConfig, model: typeof ModelModule): void {
  if (!options.full) {
    try {
      model.checkLoraFits(config, lora);
    } catch (error) {
      throw new AppError(ErrorCode.VALIDATION, `--lora-rank ${lora.rank}: ${(error as Error).message}`, { cause: error });
    }
  }
  // One micro-batch of activations: its token budget when given, else one row of the longest context the model was trained for (capped: the estimate must stay a lower bound).
  const tokens = options.microBatchTokens ?? Math.min(config.maxPositionEmbeddings, 512);
  model.checkModelFits(config, `sft --model ${options.model}`, {
    ...(options.full ? { fullTraining: true } : { lora }),
    trainedCopies: options.optimizer === 'adamw' ? 3 : 1,
    batchSize: 1,
    contextTokens: tokens,
  });
}

/** The adapter shape: --adapter-init's own (flags that contradict it are an error), else the flags over the defaults. */
function loraOf(options: SftOptions, initLora: LoraConfig | undefined, parse: (input: unknown) => LoraConfig): LoraConfig {
  const targets = options.loraTargets?.split(',').map((t) => t.trim()).filter((t) => t !== '');
  const given = {
    ...(options.loraRank === undefined ? {} : { rank: options.loraRank }),
    ...(options.loraAlpha === undefined ? {} : { alpha: options.loraAlpha }),
    ...(targets === undefined ? {} : { targets }),
  };
  let lora: LoraConfig;
  try {
    lora = parse(given);
  } catch (error) {
    throw new AppError(ErrorCode.VALIDATION, error instanceof Error ? error.message : String(error));
  }
  if (initLora === undefined) return lora;
  const clash = [
    given.rank !== undefined && given.rank !== initLora.rank ? `--lora-rank ${given.rank} (the adapter's r is ${initLora.rank})` : null,
    given.alpha !== undefined && given.alpha !== initLora.alpha ? `--lora-alpha ${given.alpha} (its lora_alpha is ${initLora.alpha})` : null,
    targets !== undefined && [...lora.targets].sort().join(',') !== [...initLora.targets].sort().join(',') ? `--lora-targets ${targets.join(',')} (its target_modules are ${initLora.targets.join(',')})` : null,
  ].filter((c): c is string => c !== null);
  if (clash.length > 0) throw new AppError(ErrorCode.VALIDATION, `--adapter-init ${options.adapterInit ?? ''} fixes the adapter's shape: ${clash.join('; ')}`);
  return initLora;
}
