import { createSession, elementCount, tensor, type GraphSession, type SessionConfig, type TensorData } from '@sqlenv/onnx-graph';
import { expectedTensorSpecs, IO, initLoraWeights, loraTensorSpecs, validateLoraWeights, type Adapter, type LoraConfig, type LoraWeights, type ModelConfig, type ModelWeights } from '@sqlenv/model';
import { AppError, ErrorCode } from '@sqlenv/shared';
import type { LearnerConfig } from './config.ts';
import { logprobMismatch, type MismatchReport } from './logprob-mismatch.ts';
import { checkSample, PaddedRows, planMicroBatches, tokenWeights, type PolicySample, type SequenceSample } from './micro-batches.ts';
import { LoraOptimizer, type OptimizerState } from './optimizer.ts';
import { buildTrainingGraph, resolveRecompute, TRAIN_IO, type TrainedParameters, type TrainingObjective } from './training-graph.ts';

export interface LoraLearnerOptions {
  lora: LoraConfig;
  config: LearnerConfig;
  objective: TrainingObjective;
  /**
   * 'lora' (default): train the adapter. 'full': train every base weight (no adapter; small models,
   * e.g. SFT of a model started from random weights); `init` is then ignored and the model's own
   * weights are the start, and `weights()` returns them.
   */
  parameters?: TrainedParameters;
  /** Starting adapter (a warm start); default PEFT's init (A random, B = 0: the base policy). */
  init?: LoraWeights;
  /** Seed of the default init. */
  seed?: number;
  session?: SessionConfig;
}

/** What one update did: the numbers a run's metrics record. */
export interface UpdateReport {
  /** Optimizer steps taken so far (this update's included). */
  step: number;
  /** The batch loss of the first pass (before this update moved the adapter). */
  loss: number;
  /** Σ w·k3 (null without a reference term or for SFT). */
  kl: number | null;
  /** Share of loss tokens whose ratio was clipped (null for SFT). */
  clipFraction: number | null;
  /** Share of loss tokens whose importance weight hit its cap (null for SFT). */
  truncatedFraction: number | null;
  /** Sampler-vs-learner log-prob mismatch over the loss tokens, at the weights the update started from (null for SFT). */
  mismatch: MismatchReport | null;
  gradNorm: number;
  learningRate: number;
  lossTokens: number;
  sequences: number;
  microBatches: number;
  forwardBackwardMs: number;
  optimizerMs: number;
}

/** The learner's whole state: a restarted learner loaded with it makes the same next update. */
export interface LearnerState {
  adapter: LoraWeights;
  optimizer: OptimizerState;
}

interface PassSums {
  loss: number;
  clipped: number;
  truncated: number;
  kl: number;
  grads: Map<string, Float64Array>;
}

/**
 * Trains a LoRA adapter on ONNX Runtime: one session of the training graph (base weights as
 * initializers, LoRA factors as inputs, gradients as outputs), micro-batches whose gradients add up to
 * the batch's, and an optimizer on float32 master copies of the factors in TypeScript.
 *
 * The policy objective takes sampled episodes (token-exact, with the behaviour log-probs and the
 * group advantage); the sft objective takes sequences with a loss mask.
 */
export class LoraLearner {
  readonly modelConfig: ModelConfig;
  readonly lora: LoraConfig;
  readonly config: LearnerConfig;
  readonly objective: TrainingObjective;
  readonly #session: GraphSession;
  readonly parameters: TrainedParameters;
  readonly #specs: { name: string; shape: readonly number[] }[];
  readonly #optimizer: LoraOptimizer;
  readonly #hasReference: boolean;
  #params: Map<string, Float32Array>;

  private constructor(modelConfig: ModelConfig, options: LoraLearnerOptions, session: GraphSession, hasReference: boolean, base: ModelWeights) {
    this.modelConfig = modelConfig;
    this.lora = options.lora;
    this.config = options.config;
    this.objective = options.objective;
    this.parameters = options.parameters ?? 'lora';
    this.#session = session;
    this.#hasReference = hasReference;
    this.#optimizer = new LoraOptimizer(options.config.optimizer);
    if (this.parameters === 'full') {
      this.#specs = expectedTensorSpecs(modelConfig).filter((s) => base.has(s.name));
      this.#params = new Map(this.#specs.map((s) => [s.name, Float32Array.from((base.get(s.name) as { data: Float32Array }).data)]));
    } else {
      this.#specs = loraTensorSpecs(modelConfig, options.lora);
      const init = options.init ?? initLoraWeights(modelConfig, options.lora, { seed: options.seed ?? 0 });
      validateLoraWeights(modelConfig, options.lora, init);
      this.#params = copyWeights(init);
    }
  }

  static async create(modelConfig: ModelConfig, weights: ModelWeights, options: LoraLearnerOptions): Promise<LoraLearner> {
    if (options.parameters === 'full' && options.objective === 'policy' && options.config.loss.klBeta > 0) {
      throw new AppError(ErrorCode.VALIDATION, 'a KL term needs the reference policy (adapter off), which full-parameter training does not keep: set loss.klBeta to 0');
    }
    const built = buildTrainingGraph(modelConfig, weights, {
      lora: options.lora,
      parameters: options.parameters ?? 'lora',
      objective: options.objective,
      loss: options.config.loss,
      vocabChunkSize: options.config.vocabChunkSize,
      recompute: resolveRecompute(modelConfig, options.config.microBatchTokens, options.config.recompute),
    });
    // ORT's memory pattern makes every run after the first peak higher (docs/training-memory.md).
    const session = await createSession(built.graph.toModel(), { memoryPattern: false, ...options.session });
    return new LoraLearner(modelConfig, options, session, built.hasReference, weights);
  }

  /** Optimizer steps taken. */
  get step(): number {
    return this.#optimizer.step;
  }

  /** A copy of the current adapter (parameters 'lora'). */
  adapter(): Adapter {
    if (this.parameters === 'full') throw new AppError(ErrorCode.INTERNAL, 'a full-parameter learner has no adapter: use weights()');
    return { lora: this.lora, weights: copyWeights(this.#params) };
  }

  /** A copy of the trained tensors by name: the adapter's, or every base weight for parameters 'full'. */
  weights(): Map<string, Float32Array> {
    return copyWeights(this.#params);
  }

  state(): LearnerState {
    return { adapter: copyWeights(this.#params), optimizer: this.#optimizer.state() };
  }

  load(state: LearnerState): void {
    if (this.parameters === 'lora') validateLoraWeights(this.modelConfig, this.lora, state.adapter);
    this.#params = copyWeights(state.adapter);
    this.#optimizer.load(state.optimizer);
  }

  /**
   * One GRPO update from sampled episodes: `epochs` passes over the batch, each summing the
   * micro-batches' gradients and taking one optimizer step. The first pass's proximal policy is the
   * current one (its log-probs, stop-gradient, from the same forward); later passes keep those.
   */
  async policyUpdate(samples: readonly PolicySample[]): Promise<UpdateReport> {
    if (this.objective !== 'policy') throw new AppError(ErrorCode.INTERNAL, 'this learner was built for sft');
    samples.forEach((s, i) => checkSample(s, `sample ${i}`));
    const { loss: lossConfig } = this.config;
    const weights = tokenWeights(samples, lossConfig.normalisation, lossConfig.maxCompletionTokens);
    const plan = planMicroBatches(samples.map((s) => s.inputIds.length), this.config.microBatchTokens, samples.map((s) => s.temperature));
    const ref = this.#hasReference ? await this.#referenceLogprobs(samples, plan) : undefined;
    let prox: number[][] | undefined;
    let first: { sums: PassSums; report: { gradNorm: number; learningRate: number }; ms: number; optimizerMs: number } | undefined;
    let optimizerMs = 0;
    for (let epoch = 0; epoch < this.config.epochs; epoch++) {
      const started = performance.now();
      const recorded: number[][] = samples.map(() => []);
      const sums = await this.#pass(plan, samples, (rows, idx) => {
        const pick = (f: (i: number) => readonly number[]): (readonly number[])[] => idx.map(f);
        return {
          [IO.temperature]: tensor('float32', [], [(samples[idx[0] as number] as PolicySample).temperature]),
          [TRAIN_IO.tokenWeights]: rows.perToken('float32', pick((i) => weights[i] as number[])),
          [TRAIN_IO.advantages]: rows.perToken('float32', pick((i) => (samples[i] as PolicySample).inputIds.map(() => (samples[i] as PolicySample).advantage))),
          [TRAIN_IO.behaviourLogprobs]: rows.perToken('float32', pick((i) => (samples[i] as PolicySample).behaviourLogprobs)),
          [TRAIN_IO.proxLogprobs]: rows.perToken('float32', pick(prox === undefined ? zerosOf(samples) : (i) => prox?.[i] as number[])),
          [TRAIN_IO.proxFromCurrent]: tensor('bool', [], [prox === undefined]),
          ...(ref === undefined ? {} : { [TRAIN_IO.refLogprobs]: rows.perToken('float32', pick((i) => ref[i] as number[])) }),
        };
      }, (idx, logprobs) => idx.forEach((i, b) => (recorded[i] = logprobs(b))));
      const ms = performance.now() - started;
      const optStarted = performance.now();
      const report = this.#optimizer.apply(this.#params, sums.grads);
      const thisOptimizerMs = performance.now() - optStarted;
      optimizerMs += thisOptimizerMs;
      if (first === undefined) first = { sums, report, ms, optimizerMs: thisOptimizerMs };
      prox ??= recorded;
    }
    const lossTokens = lossTokenCount(weights);
    const done = first as NonNullable<typeof first>;
    return {
      step: this.#optimizer.step,
      loss: done.sums.loss,
      kl: this.#hasReference ? done.sums.kl : null,
      clipFraction: lossTokens === 0 ? 0 : done.sums.clipped / lossTokens,
      truncatedFraction: lossTokens === 0 ? 0 : done.sums.truncated / lossTokens,
      mismatch: logprobMismatch(samples, prox ?? [], lossConfig.importanceCap),
      gradNorm: done.report.gradNorm,
      learningRate: done.report.learningRate,
      lossTokens,
      sequences: samples.length,
      microBatches: plan.length,
      forwardBackwardMs: done.ms,
      optimizerMs,
    };
  }

  /** One supervised step: mean token cross-entropy over every masked token of the batch. */
  async sftUpdate(samples: readonly SequenceSample[]): Promise<UpdateReport> {
    const { weights, plan, feedsOf } = this.#sftBatch(samples);
    samples.forEach((s, i) => checkSample(s, `sample ${i}`));
    const started = performance.now();
    const sums = await this.#pass(plan, samples, feedsOf);
    const ms = performance.now() - started;
    const optStarted = performance.now();
    const report = this.#optimizer.apply(this.#params, sums.grads);
    return {
      step: this.#optimizer.step,
      loss: sums.loss,
      kl: null,
      clipFraction: null,
      truncatedFraction: null,
      mismatch: null,
      gradNorm: report.gradNorm,
      learningRate: report.learningRate,
      lossTokens: lossTokenCount(weights),
      sequences: samples.length,
      microBatches: plan.length,
      forwardBackwardMs: ms,
      optimizerMs: performance.now() - optStarted,
    };
  }

  /** The batch loss at the current adapter without updating (SFT objective: mean token cross-entropy). */
  async evaluateLoss(samples: readonly SequenceSample[]): Promise<number> {
    const { plan, feedsOf } = this.#sftBatch(samples);
    let loss = 0;
    for (const idx of plan) {
      const rows = this.#rows(samples, idx);
      const out = await this.#session.run({ ...this.#common(rows), ...feedsOf(rows, idx) }, { outputs: [TRAIN_IO.loss] });
      loss += scalarOf(out[TRAIN_IO.loss]);
    }
    return loss;
  }

  async close(): Promise<void> {
    await this.#session.close();
  }

  /** Run every micro-batch once and sum losses, counters and gradients (in float64, in plan order). */
  async #pass(
    plan: readonly number[][],
    samples: readonly SequenceSample[],
    feedsOf: (rows: PaddedRows, idx: readonly number[]) => Record<string, TensorData>,
    onLogprobs?: (idx: readonly number[], logprobs: (b: number) => number[]) => void,
  ): Promise<PassSums> {
    const grads = new Map(this.#specs.map((s) => [s.name, new Float64Array(elementCount(s.shape))]));
    const sums: PassSums = { loss: 0, clipped: 0, truncated: 0, kl: 0, grads };
    for (const idx of plan) {
      const rows = this.#rows(samples, idx);
      const out = await this.#session.run({ ...this.#common(rows), ...feedsOf(rows, idx) });
      const loss = scalarOf(out[TRAIN_IO.loss]);
      if (!Number.isFinite(loss)) throw new AppError(ErrorCode.INTERNAL, `training produced a non-finite loss (${loss}) on a micro-batch of ${idx.length} sequences; no update was applied`);
      sums.loss += loss;
      if (this.objective === 'policy') {
        sums.clipped += scalarOf(out[TRAIN_IO.clippedTokens]);
        sums.truncated += scalarOf(out[TRAIN_IO.truncatedTokens]);
        sums.kl += scalarOf(out[TRAIN_IO.kl]);
      }
      for (const spec of this.#specs) {
        const part = out[TRAIN_IO.gradient(spec.name)]?.data as Float32Array;
        const total = grads.get(spec.name) as Float64Array;
        for (let i = 0; i < total.length; i++) total[i] = (total[i] as number) + (part[i] as number);
      }
      if (onLogprobs) {
        const lp = out[TRAIN_IO.logprobs]?.data as Float32Array;
        onLogprobs(idx, (b) => rows.unpad(lp, b));
      }
    }
    return sums;
  }

  /** The SFT objective's token weights (a token mean over the batch), micro-batches and per-batch feeds. */
  #sftBatch(samples: readonly SequenceSample[]): { weights: number[][]; plan: number[][]; feedsOf: (rows: PaddedRows, idx: readonly number[]) => Record<string, TensorData> } {
    if (this.objective !== 'sft') throw new AppError(ErrorCode.INTERNAL, 'this learner was built for the policy objective');
    const weights = tokenWeights(samples, 'token', 1);
    const plan = planMicroBatches(samples.map((s) => s.inputIds.length), this.config.microBatchTokens);
    const feedsOf = (rows: PaddedRows, idx: readonly number[]): Record<string, TensorData> => ({
      [IO.temperature]: tensor('float32', [], [1]),
      [TRAIN_IO.tokenWeights]: rows.perToken('float32', idx.map((i) => weights[i] as number[])),
    });
    return { weights, plan, feedsOf };
  }

  /** Log-probs of the reference policy (adapter off) for every sample, one forward per micro-batch. */
  async #referenceLogprobs(samples: readonly PolicySample[], plan: readonly number[][]): Promise<number[][]> {
    const out: number[][] = samples.map(() => []);
    const zeros = new Map(this.#specs.map((s) => [s.name, new Float32Array(elementCount(s.shape))]));
    for (const idx of plan) {
      const rows = this.#rows(samples, idx);
      const empty = rows.perToken('float32', idx.map((i) => (samples[i] as PolicySample).inputIds.map(() => 0)));
      const result = await this.#session.run(
        {
          ...this.#common(rows, zeros),
          [IO.temperature]: tensor('float32', [], [(samples[idx[0] as number] as PolicySample).temperature]),
          [TRAIN_IO.tokenWeights]: empty,
          [TRAIN_IO.advantages]: empty,
          [TRAIN_IO.behaviourLogprobs]: empty,
          [TRAIN_IO.proxLogprobs]: empty,
          [TRAIN_IO.proxFromCurrent]: tensor('bool', [], [true]),
          [TRAIN_IO.refLogprobs]: empty,
        },
        { outputs: [TRAIN_IO.logprobs] },
      );
      const lp = result[TRAIN_IO.logprobs]?.data as Float32Array;
      idx.forEach((i, b) => (out[i] = rows.unpad(lp, b)));
    }
    return out;
  }

  #rows(samples: readonly SequenceSample[], idx: readonly number[]): PaddedRows {
    return new PaddedRows(idx.map((i) => (samples[i] as SequenceSample).inputIds), this.modelConfig.padTokenId);
  }

  #common(rows: PaddedRows, adapter: ReadonlyMap<string, Float32Array> = this.#params): Record<string, TensorData> {
    const feeds: Record<string, TensorData> = { [IO.inputIds]: rows.batch.ids, [IO.attentionMask]: rows.batch.mask };
    for (const spec of this.#specs) feeds[spec.name] = tensor('float32', [...spec.shape], adapter.get(spec.name) as Float32Array);
    return feeds;
  }
}

function zerosOf(samples: readonly SequenceSample[]): (i: number) => number[] {
  return (i) => (samples[i] as SequenceSample).inputIds.map(() => 0);
}

/** Tokens that carry loss (a non-zero weight) in a batch. */
function lossTokenCount(weights: readonly (readonly number[])[]): number {
  return weights.reduce((a, w) => a + w.filter((x) => x > 0).length, 0);
}

function scalarOf(t: TensorData | undefined): number {
  return Number((t?.data as Float32Array | undefined)?.[0] ?? Number.NaN);
}

function copyWeights(weights: ReadonlyMap<string, Float32Array>): Map<string, Float32Array> {
  return new Map([...weights].map(([k, v]) => [k, Float32Array.from(v)]));
}
