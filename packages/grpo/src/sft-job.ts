import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { LoraConfig, ModelConfig } from '@sqlenv/model';
import type * as ModelModule from '@sqlenv/model';
import type { SessionConfig } from '@sqlenv/onnx-graph';
import { AppError, checkDirOutput, checkOutputNotInput, ErrorCode, silentLogger, writeDirAtomic, type Logger } from '@sqlenv/shared';
import { decodeSftCheckpoint, encodeSftCheckpoint, type SftCheckpoint } from './checkpoint.ts';
import { parseLearnerConfig } from './config.ts';
import type { LearnerState } from './lora-learner.ts';
import { readSftExamples } from './sft-examples.ts';
import { runSft, type SftEvalReport, type SftStepReport } from './sft-run.ts';

/** What an SFT job needs (`sqlenv sft` fills the defaults; learner settings not named keep LearnerConfigSchema's). */
export interface SftJobOptions {
  /** The base model directory. */
  model: string;
  /** A PEFT adapter directory to start from; its r, lora_alpha and target_modules are the adapter's shape. */
  adapterInit?: string | undefined;
  /** Training lines (token ids with a loss mask, or chat messages). */
  data: string;
  steps: number;
  /**
   * Learning rate. 1e-4 is the usual order for LoRA SFT on 0.5–2B models (PEFT's examples use 1e-4
   * to 2e-4; full fine-tuning uses ~1e-5).
   */
  learningRate: number;
  /** constant, or cosine decay over `steps` to minLrRatio × learningRate (after warmupSteps of linear warm-up). */
  schedule: 'constant' | 'cosine';
  warmupSteps: number;
  minLrRatio: number;
  /** AdamW's decoupled weight decay. */
  weightDecay: number;
  /** adamw (gradients clipped to global norm 1) or sgd: p ← p − lr·grad, nothing else. */
  optimizer: 'adamw' | 'sgd';
  batchSize: number;
  loraRank?: number | undefined;
  loraAlpha?: number | undefined;
  /** Comma-separated projection names. */
  loraTargets?: string | undefined;
  microBatchTokens?: number | undefined;
  /** Seed of the adapter's initialisation when there is no adapterInit (and of the shuffle). */
  seed: number;
  /** Render messages lines with Qwen3's thinking mode (no empty think block in the generation prompt). */
  thinking: boolean;
  /**
   * Train every base weight instead of a LoRA adapter and write a whole model directory to `out`
   * (config, weights, tokenizer files): SFT or pretraining of a small model that starts from random
   * weights, whose frozen random embedding an adapter cannot reshape. Small models only.
   */
  full: boolean;
  /** Visit the data lines in a new order every epoch, drawn from the seed (default: file order, wrapping around). */
  shuffle: boolean;
  /**
   * Write the run's whole state (trained tensors, AdamW moments, step) to OUT/checkpoint/ every this
   * many steps and after the last, with a loadable model (full) or adapter directory beside it, so a
   * long run can be stopped and continued (`resume`) and evaluated while it runs.
   */
  checkpointEvery?: number | undefined;
  /**
   * Continue from OUT/checkpoint/: the steps after the checkpoint's, on the batches they would have
   * had. The options that decide batches and updates (data, batch size, seed, shuffle, learning-rate
   * schedule — with cosine, steps too —, optimizer, what is trained) must be the ones the checkpoint
   * was written with; a constant-rate run may be continued to a larger `steps`.
   */
  resume: boolean;
  /** Replace a non-empty `out` directory (an existing adapter or model) whole. Never allowed over the model or adapterInit. */
  force: boolean;
  /** Held-out lines (same formats as data) whose loss is printed as `{"eval_step", "eval_loss"}` lines. */
  evalData?: string | undefined;
  /** Measure the evalData loss every this many steps (and before the first and after the last). */
  evalEvery?: number | undefined;
  out: string;
  /** Where the training session runs (default: onnx-graph's defaults, the CPU). */
  execution?: Pick<SessionConfig, 'provider' | 'deviceId' | 'intraOpThreads' | 'interOpThreads' | 'cpuMemArena'>;
}

export interface SftSummary {
  /** Steps this invocation took (after a --resume: those after the checkpoint's). */
  steps: number;
  examples: number;
  /** NaN when a --resume had no step left to take. */
  firstLoss: number;
  lastLoss: number;
  out: string;
  lora: LoraConfig;
}

/**
 * An SFT job, as `sqlenv sft` runs it: read the data, check --out, train (resuming from a checkpoint
 * when asked), write the adapter (or, `full`, the model directory). One JSON line per step on
 * `io.stdout` (`{"step", "loss", "lr", "grad_norm", "tokens", "lines", "micro_batches", "ms"}`), one
 * per checkpoint and held-out evaluation, then a summary line (`{"done": true, …}`). `signal` stops it
 * between steps; `onStep` sees every step's report (after its JSON line is written). A GPU provider
 * is the caller's to check before (it is used as given).
 */
export async function runSftJob(
  options: SftJobOptions,
  io: { stdout: NodeJS.WritableStream },
  { signal, onStep, logger = silentLogger }: { signal?: AbortSignal; onStep?: (report: SftStepReport) => void; logger?: Logger } = {},
): Promise<SftSummary> {
  const execution = options.execution ?? {};
  const model = await import('@sqlenv/model');
  if (options.full && (options.adapterInit !== undefined || options.loraRank !== undefined || options.loraAlpha !== undefined || options.loraTargets !== undefined)) {
    throw new AppError(ErrorCode.VALIDATION, '--full trains the base weights: --adapter-init and --lora-* do not apply');
  }
  // The output is checked before minutes of training: never over an input, never over another output
  // without --force (a --resume continues in its own --out, which holds the checkpoint).
  checkOutputNotInput({ label: '--out', path: options.out }, [
    { label: '--model', path: options.model },
    { label: '--adapter-init', path: options.adapterInit },
    { label: '--data', path: options.data },
  ]);
  if (!options.resume) checkDirOutput(options.out, { force: options.force, label: '--out' });
  const config = model.readModelConfig(options.model);
  const init = options.adapterInit === undefined ? undefined : model.loadAdapterDir(options.adapterInit, config);
  const lora = loraOf(options, init?.lora, model.parseLoraConfig);
  checkSftFits(options, config, lora, model);
  const weights = model.loadModelWeights(options.model, config);
  if (options.evalEvery !== undefined && options.evalData === undefined) throw new AppError(ErrorCode.VALIDATION, '--eval-every needs --eval-data');
  const loadChat = (): ReturnType<typeof model.loadChatFormat> => model.loadChatFormat(options.model, { thinking: options.thinking, config });
  const text = readText(options.data, '--data');
  const examples = await readSftExamples(text, { config, source: options.data, loadChat });
  const evalExamples = options.evalData === undefined ? undefined : await readSftExamples(readText(options.evalData, '--eval-data'), { config, source: options.evalData, loadChat });
  const checkpointDir = join(options.out, 'checkpoint');
  const checkpointFile = join(checkpointDir, 'sft-state.safetensors');
  const run = runFingerprint(options, text, examples.length, lora);
  let resume: SftCheckpoint | undefined;
  if (options.resume) {
    // A run killed between the two renames of writeCheckpoint left the previous checkpoint as checkpoint.old.
    const file = [checkpointFile, join(`${checkpointDir}.old`, 'sft-state.safetensors')].find((f) => existsSync(f));
    if (file === undefined) throw new AppError(ErrorCode.VALIDATION, `--resume: no checkpoint at ${checkpointFile}`);
    resume = decodeSftCheckpoint(readFileSync(file), file);
    checkSameRun(resume.run, run, file);
  }
  const learnerConfig = parseLearnerConfig({
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
  const { adapter, weights: trained, reports } = await runSft({
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
    session: { ...execution, logger: logger.child({ role: 'sft' }) },
    ...(signal === undefined ? {} : { signal }),
    ...(init === undefined ? {} : { init: init.weights }),
    ...(resume === undefined ? {} : { resume: { step: resume.step, state: resume.state } }),
    ...(options.checkpointEvery === undefined
      ? {}
      : {
          checkpointEvery: options.checkpointEvery,
          onCheckpoint: (step: number, state: LearnerState) => {
            writeCheckpoint(checkpointDir, encodeSftCheckpoint({ step, state, run }), (dir) =>
              options.full
                ? writeModelDir(options.model, dir, state.adapter, weights, model.writeSafetensorsCheckpoint, true)
                : model.saveAdapterDir(dir, config, { lora, weights: state.adapter }, { baseModel: options.model, force: true, label: 'checkpoint' }),
            );
            io.stdout.write(`${JSON.stringify({ checkpoint: checkpointDir, step })}\n`);
          },
        }),
    ...(evalExamples === undefined
      ? {}
      : {
          evalExamples,
          evalEvery: options.evalEvery ?? options.steps,
          onEval: (r: SftEvalReport) => io.stdout.write(`${JSON.stringify({ eval_step: r.step, eval_loss: r.loss, eval_tokens: r.lossTokens, eval_sequences: r.sequences, ms: Math.round(r.ms) })}\n`),
        }),
    onStep: (r) => {
      io.stdout.write(
        `${JSON.stringify({ step: r.step, loss: r.loss, lr: r.learningRate, grad_norm: r.gradNorm, tokens: r.lossTokens, lines: r.lines, micro_batches: r.microBatches, ms: Math.round(r.ms) })}\n`,
      );
      onStep?.(r);
    },
  });
  // The output replaces --out whole; a run with checkpoints keeps its checkpoint/ beside the result.
  const files = keepingCheckpoint(options.out, checkpointDir, () => {
    const force = options.force || options.resume || options.checkpointEvery !== undefined;
    return trained !== null
      ? writeModelDir(options.model, options.out, trained, weights, model.writeSafetensorsCheckpoint, force)
      : model.saveAdapterDir(options.out, config, adapter as NonNullable<typeof adapter>, { baseModel: options.model, force, label: '--out' });
  });
  const summary: SftSummary = {
    steps: reports.length,
    examples: examples.length,
    firstLoss: reports[0]?.loss ?? Number.NaN,
    lastLoss: reports.at(-1)?.loss ?? Number.NaN,
    out: options.out,
    lora,
  };
  io.stdout.write(
    `${JSON.stringify({ done: true, steps: summary.steps, examples: summary.examples, first_loss: summary.firstLoss, last_loss: summary.lastLoss, out: options.out, files, lora: { r: lora.rank, lora_alpha: lora.alpha, target_modules: lora.targets } })}\n`,
  );
  return summary;
}

function readText(path: string, flag: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (cause) {
    throw new AppError(ErrorCode.VALIDATION, `cannot read ${flag} ${path}`, { cause });
  }
}

/**
 * What decides a run's batches and updates: a checkpoint continues only the run that wrote it. The data
 * is fingerprinted by content (SHA-256), so a regenerated file with other lines is refused.
 */
function runFingerprint(options: SftJobOptions, text: string, lines: number, lora: LoraConfig): SftCheckpoint['run'] {
  return {
    data_sha256: createHash('sha256').update(text).digest('hex'),
    data_lines: lines,
    // A cosine schedule is fixed by the total; a constant one is not, so such a run may be extended.
    ...(options.schedule === 'cosine' ? { steps: options.steps } : {}),
    batch_size: options.batchSize,
    seed: options.seed,
    shuffle: options.shuffle,
    full: options.full,
    optimizer: options.optimizer,
    lr: options.learningRate,
    schedule: options.schedule,
    warmup_steps: options.warmupSteps,
    min_lr_ratio: options.minLrRatio,
    weight_decay: options.weightDecay,
    ...(options.full ? {} : { lora: JSON.stringify(lora) }),
  };
}

function checkSameRun(written: SftCheckpoint['run'], now: SftCheckpoint['run'], file: string): void {
  const differ = Object.keys({ ...written, ...now }).filter((key) => written[key] !== now[key]);
  if (differ.length > 0) {
    const list = differ.map((key) => `${key}: checkpoint ${JSON.stringify(written[key])}, now ${JSON.stringify(now[key])}`).join('; ');
    throw new AppError(ErrorCode.VALIDATION, `--resume: ${file} was written by another run (${list})`);
  }
}

/**
 * Replaces OUT/checkpoint/ as one step: the state file and its loadable model or adapter directory are
 * written to a sibling directory first, then renamed into place, so a run killed mid-write leaves the
 * previous checkpoint whole.
 */
function writeCheckpoint(dir: string, state: Buffer, writeLoadable: (dir: string) => unknown): void {
  const next = `${dir}.next`;
  const old = `${dir}.old`;
  rmSync(next, { recursive: true, force: true });
  mkdirSync(next, { recursive: true });
  writeFileSync(join(next, 'sft-state.safetensors'), state);
  writeLoadable(join(next, 'model'));
  rmSync(old, { recursive: true, force: true });
  if (existsSync(dir)) renameSync(dir, old);
  renameSync(next, dir);
  rmSync(old, { recursive: true, force: true });
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
  // In the base checkpoint's order, whatever order the trained map has (a resumed run's comes from its checkpoint file).
  const names = [...base.keys()].filter((name) => trained.has(name));
  // Built whole under a temporary sibling and renamed: no mix of an old model's files and new weights.
  writeDirAtomic(
    out,
    (dir) => {
      for (const f of copied) copyFileSync(join(source, f), join(dir, f));
      write(dir, names.map((name) => ({ name, shape: (base.get(name) as { shape: number[] }).shape, data: trained.get(name) as Float32Array })));
    },
    { force, label: '--out' },
  );
  return [...copied, 'model.safetensors'].sort();
}

/** Run `write` (which replaces `out` whole) with `out`'s checkpoint directory moved aside and put back after. */
function keepingCheckpoint<T>(out: string, checkpointDir: string, write: () => T): T {
  if (!existsSync(checkpointDir)) return write();
  const aside = `${out}.checkpoint-${process.pid}`;
  renameSync(checkpointDir, aside);
  try {
    return write();
  } finally {
    mkdirSync(out, { recursive: true });
    renameSync(aside, checkpointDir);
  }
}

/** The adapter shape: --adapter-init's own (flags that contradict it are an error), else the flags over the defaults. */
function loraOf(options: SftJobOptions, initLora: LoraConfig | undefined, parse: (input: unknown) => LoraConfig): LoraConfig {
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

/**
 * Refuse, before any weight is read, a LoRA rank the model's projections cannot hold and a run
 * whose weights, trained copies (gradients + AdamW moments) and activations exceed this machine's
 * memory, with the numbers.
 */
function checkSftFits(options: SftJobOptions, config: ModelConfig, lora: LoraConfig, model: typeof ModelModule): void {
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
