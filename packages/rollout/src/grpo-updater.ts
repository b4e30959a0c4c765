import type { LearnerMemoryPlan, LoraLearner, MismatchReport, PolicySample, UpdateReport } from '@sqlenv/grpo';
import { parseLearnerConfig, type LearnerConfig } from '@sqlenv/grpo/config';
import type { ModelConfig } from '@sqlenv/model';
import { trainingSequence, type RolloutRunSpec, type RunModelSpec } from '@sqlenv/protocol';
import { AppError, ErrorCode, readMemoryLimit, silentLogger, type Logger, type MemoryLimit } from '@sqlenv/shared';
import type { SessionConfig } from '@sqlenv/onnx-graph';
import type { UpdateStats } from '@sqlenv/runs';
import type { ModelExecution } from './resources/execution.ts';
import { isStatsWeightsBlob, StatsPolicyUpdater, type PolicyUpdate, type PolicyUpdater, type TrainingBatch } from './trainer.ts';

/** The part stored beside a version's adapter: the optimizer state (`<weights key>/optimizer`). */
export const OPTIMIZER_PART = 'optimizer';

/**
 * The trainer's GRPO step on a model run: every trajectory of the batch becomes one training
 * sequence (token-exact, `trainingSequence`) with its group's advantage (the rollout's group
 * scoring, computed once when the group finished), the learner takes one update, and the new
 * adapter (PEFT safetensors) is what the trainer publishes; the optimizer state rides along as a
 * part of the same version, so a restarted trainer continues exactly where the last commit left.
 */
export class GrpoPolicyUpdater implements PolicyUpdater {
  readonly #learner: LoraLearner;
  readonly #modelConfig: ModelConfig;
  readonly #initial: { adapter: Map<string, Float32Array> };
  readonly #logger: Logger;
  #last: UpdateReport | null = null;

  private constructor(learner: LoraLearner, modelConfig: ModelConfig, logger: Logger) {
    this.#learner = learner;
    this.#modelConfig = modelConfig;
    this.#initial = { adapter: learner.state().adapter };
    this.#logger = logger;
  }

  /**
   * A learner for a run's model section on this process's model directory (fingerprint-checked,
   * as workers do): the run's LoRA shape, its initial adapter (or PEFT's init: the base policy) and
   * its learner settings.
   */
  static async create(spec: RunModelSpec, modelDir: string, options: { logger?: Logger; session?: SessionConfig; seed?: number; memoryLimit?: MemoryLimit } & LearnerOverrides = {}): Promise<GrpoPolicyUpdater> {
    const model = await import('@sqlenv/model');
    const { LoraLearner } = await import('@sqlenv/grpo');
    const fingerprint = model.modelFingerprint(modelDir);
    if (fingerprint !== spec.fingerprint) {
      throw new AppError(ErrorCode.VALIDATION, `--model ${modelDir} is not the run's model: fingerprint ${fingerprint.slice(0, 19)}… differs from the spec's ${spec.fingerprint.slice(0, 19)}…`);
    }
    // Sized to the memory limit before the weights are read: a learner that cannot fit is refused with the numbers.
    const plan = await planLearner(spec, modelDir, options, options.memoryLimit);
    if (plan.reduced) (options.logger ?? silentLogger).warn({ microBatchTokens: plan.microBatchTokens, budgetBytes: plan.budgetBytes }, 'learner micro-batch reduced to fit the memory limit');
    const { config, weights } = model.loadModel(modelDir);
    const lora = model.parseLoraConfig(spec.lora);
    const init = spec.adapter === null ? undefined : model.loadAdapterDir(spec.adapter, config).weights;
    const learner = await LoraLearner.create(config, weights, {
      lora,
      objective: 'policy',
      config: { ...learnerConfigOf(spec, options), microBatchTokens: plan.microBatchTokens, recompute: plan.recompute },
      seed: options.seed ?? 0,
      ...(init === undefined ? {} : { init }),
      ...(options.session === undefined ? {} : { session: options.session }),
    });
    return new GrpoPolicyUpdater(learner, config, (options.logger ?? silentLogger).child({ component: 'grpo-updater' }));
  }

  async restore(weights: Buffer | null, version: number, readPart?: (name: string) => Promise<Buffer | null>): Promise<void> {
    const { decodeAdapter } = await import('@sqlenv/model');
    const { decodeOptimizerState } = await import('@sqlenv/grpo');
    if (weights === null || isStatsWeightsBlob(weights)) {
      if (version > 0 && weights !== null) throw new AppError(ErrorCode.VALIDATION, `version ${version} was trained by the statistics-only updater: a GRPO trainer cannot continue it`);
      this.#learner.load({ adapter: this.#initial.adapter, optimizer: { step: 0, m: new Map(), v: new Map() } });
      return;
    }
    const adapter = decodeAdapter(this.#modelConfig, weights, { lora: this.#learner.lora, label: `weights of version ${version}` });
    const optimizerBytes = readPart === undefined ? null : await readPart(OPTIMIZER_PART);
    if (optimizerBytes === null) this.#logger.warn({ version }, 'no optimizer state stored with this version: the optimizer starts fresh');
    const optimizer = optimizerBytes === null ? { step: 0, m: new Map(), v: new Map() } : decodeOptimizerState(optimizerBytes, `optimizer state of version ${version}`);
    this.#learner.load({ adapter: adapter.weights, optimizer });
    this.#logger.info({ version, optimizerStep: optimizer.step }, 'learner restored');
  }

  async update(batch: TrainingBatch): Promise<PolicyUpdate> {
    const { encodeLearnerState } = await import('@sqlenv/grpo');
    const samples = policySamples(batch);
    const report = await this.#learner.policyUpdate(samples);
    this.#last = report;
    const mismatch = report.mismatch?.all;
    this.#logger.info(
      { version: batch.version, loss: report.loss, gradNorm: report.gradNorm, clipFraction: report.clipFraction, mismatchK3: mismatch?.k3Mean, truncatedFraction: report.truncatedFraction, lossTokens: report.lossTokens, ms: Math.round(report.forwardBackwardMs) },
      'policy updated',
    );
    const encoded = encodeLearnerState(this.#modelConfig, this.#learner.lora, this.#learner.state(), { policy_version: String(batch.version) });
    return { weights: encoded.adapter, parts: { [OPTIMIZER_PART]: encoded.optimizer } };
  }

  lastUpdateStats(): UpdateStats | null {
    const r = this.#last;
    if (r === null) return null;
    return {
      loss: r.loss,
      kl: r.kl,
      clip_fraction: r.clipFraction,
      grad_norm: r.gradNorm,
      learning_rate: r.learningRate,
      truncated_fraction: r.truncatedFraction,
      ...mismatchStats(r.mismatch),
      tis_cap: this.#learner.config.loss.importanceCap,
      loss_tokens: r.lossTokens,
      update_ms: r.forwardBackwardMs + r.optimizerMs,
    };
  }

  /** The adapter now (tests, evaluation). */
  adapter(): Map<string, Float32Array> {
    return this.#learner.adapter().weights;
  }

  close(): Promise<void> {
    return this.#learner.close();
  }
}

/** A run's updater, and how to release it when the run is done. */
export type ClosablePolicyUpdater = PolicyUpdater & { close(): Promise<void> };

/**
 * The updater a run trains with, decided in one place for the embedded and the distributed trainer:
 * GRPO on the LoRA adapter for a model run (this process's model directory must be the run's: the
 * same one the workers use), the statistics-only updater for oracle and random runs.
 */
export async function policyUpdaterFor(spec: RolloutRunSpec, modelDir: string | undefined, logger: Logger, execution?: ModelExecution, overrides: LearnerOverrides = {}): Promise<ClosablePolicyUpdater> {
  if (spec.model === undefined) return Object.assign(new StatsPolicyUpdater(), { close: () => Promise.resolve() });
  if (modelDir === undefined) throw new AppError(ErrorCode.VALIDATION, `run ${spec.run_id} trains a model: give the trainer --model DIR (SQLENV_MODEL_DIR), the same model directory the workers use`);
  return GrpoPolicyUpdater.create(spec.model, modelDir, { logger, session: { ...execution, logger: logger.child({ role: 'learner' }) }, ...overrides });
}

/**
 * The learner's micro-batch and recompute setting for a model run under the memory limit (this
 * process's, the container's where smaller): a micro-batch the run's learner settings leave at the
 * default is shrunk to fit; one they set is checked. Throws VALIDATION with the estimate when none
 * fits. `sqlenv train` and `learn` call it at start, before anything is loaded.
 */
export async function planLearner(spec: RunModelSpec, modelDir: string, overrides: LearnerOverrides = {}, limit: MemoryLimit = readMemoryLimit()): Promise<LearnerMemoryPlan> {
  const { readModelConfig, parseLoraConfig } = await import('@sqlenv/model');
  const { planLearnerMemory } = await import('@sqlenv/grpo');
  const config = learnerConfigOf(spec, overrides);
  return planLearnerMemory({
    config: readModelConfig(modelDir),
    lora: parseLoraConfig(spec.lora),
    microBatchTokens: config.microBatchTokens,
    recompute: config.recompute,
    explicit: spec.learner['microBatchTokens'] !== undefined,
    limit,
  });
}

/**
 * Learner settings a trainer process may set over the run spec's: the truncated-IS cap depends on
 * how far the sampler's numerics are from the learner's (an ONNX Runtime worker, a vLLM server), which
 * is the deployment's business. The value used is in every metrics line (`tis_cap`).
 */
export interface LearnerOverrides {
  /** loss.importanceCap (`--tis-cap`; 0 = no importance weight). */
  tisCap?: number | undefined;
}

/** The run's learner settings (the spec's `learner` section, validated by the grpo package's schema), with a trainer's overrides on top. */
export function learnerConfigOf(spec: RunModelSpec, overrides: LearnerOverrides = {}): LearnerConfig {
  const config = parseLearnerConfig(spec.learner);
  if (overrides.tisCap === undefined) return config;
  return parseLearnerConfig({ ...config, loss: { ...config.loss, importanceCap: overrides.tisCap } });
}

/**
 * The mismatch figures of an update as metrics-line numbers (UpdateStats extras): over every loss
 * token (staleness included), and over the tokens sampled with the learner's own weights (`fresh`:
 * the sampler-vs-learner numerics alone; null when there were none).
 */
export function mismatchStats(mismatch: MismatchReport | null): Record<string, number | null> {
  if (mismatch === null) return {};
  const { all, fresh } = mismatch;
  return {
    mismatch_abs_logprob: all.absLogprobMean,
    mismatch_k3: all.k3Mean,
    is_weight_mean: all.importanceWeightMean,
    mismatch_fresh_abs_logprob: fresh?.absLogprobMean ?? null,
    mismatch_fresh_k3: fresh?.k3Mean ?? null,
    fresh_token_fraction: all.tokens === 0 ? null : (fresh?.tokens ?? 0) / all.tokens,
  };
}

/** One policy sample per trajectory: its token-exact sequence, its group's advantage and each token's lag behind the learner. */
export function policySamples(batch: TrainingBatch): PolicySample[] {
  const samples: PolicySample[] = [];
  batch.groups.forEach((group, g) => {
    const trajectories = batch.trajectories[g] ?? [];
    trajectories.forEach((trajectory, i) => {
      const advantage = group.advantages[i];
      if (advantage === undefined) throw new AppError(ErrorCode.INTERNAL, `group ${group.group_id} has no advantage for episode ${i}`);
      const sequence = trainingSequence(trajectory);
      // The learner holds version − 1 while it makes `version`; prompt tokens (version −1) have no lag.
      const behaviourLag = sequence.policy_versions.map((v) => (v < 0 ? -1 : batch.version - 1 - v));
      samples.push({ inputIds: sequence.input_ids, lossMask: sequence.loss_mask, behaviourLogprobs: sequence.logprobs, behaviourLag, advantage, temperature: sequence.temperature });
    });
  });
  return samples;
}
