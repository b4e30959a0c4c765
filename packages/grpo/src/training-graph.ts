import { gradients, type Graph, type Tensor } from '@sqlenv/onnx-graph';
import { buildScoringGraph, type DecoderRecompute, type LoraConfig, type ModelConfig, type ModelFloat, type ModelWeights } from '@sqlenv/model';
import type { PolicyLossConfig } from './config.ts';
import { policyLoss, sftLoss } from './policy-loss.ts';

/** Input and output names of the training graph (beside the scoring graph's input_ids, attention_mask, temperature). */
export const TRAIN_IO = {
  tokenWeights: 'token_weights',
  advantages: 'advantages',
  behaviourLogprobs: 'behaviour_logprobs',
  proxLogprobs: 'prox_logprobs',
  proxFromCurrent: 'prox_from_current',
  refLogprobs: 'ref_logprobs',
  loss: 'loss',
  logprobs: 'logprobs',
  clippedTokens: 'clipped_tokens',
  truncatedTokens: 'truncated_tokens',
  kl: 'kl',
  gradient: (loraName: string): string => `grad/${loraName}`,
} as const;

export type TrainingObjective = 'policy' | 'sft';

/** What a training graph differentiates: the LoRA factors (base weights frozen), or every base weight (no LoRA). */
export type TrainedParameters = 'lora' | 'full';

export interface TrainingGraphOptions {
  /** The adapter's shape ('lora' parameters; ignored for 'full'). */
  lora: LoraConfig;
  objective: TrainingObjective;
  /**
   * 'lora' (default): gradients w.r.t. the LoRA factors, base weights are initializers. 'full': the base
   * weights are graph inputs and get the gradients (pretraining or SFT of a small model from scratch);
   * the head's gradient is then the autodiff form (its closed form covers the hidden states only) and
   * nothing is recomputed, since full training is for models small enough to keep their activations.
   */
  parameters?: TrainedParameters;
  /** The policy loss's settings (objective 'policy'). */
  loss?: PolicyLossConfig;
  dtype?: ModelFloat;
  vocabChunkSize?: number;
  /**
   * The vocabulary head's gradient (see `ScoringGraphOptions.logprobGradient`). Default 'analytic':
   * chunk logits are not kept for the backward pass. 'autodiff' is the plain form, kept to measure
   * against (bench/train.bench.ts) and to cross-check the analytic gradient in tests.
   */
  logprobGradient?: 'autodiff' | 'analytic';
  /** What the backward pass recomputes instead of keeping (`DecoderBuildOptions.recompute`); default 'layer'. */
  recompute?: DecoderRecompute;
}

/** Above this estimate of one micro-batch's kept activations, `recompute: 'auto'` recomputes whole layers. */
export const RECOMPUTE_ABOVE_BYTES = 2 * 2 ** 30;

/** Row width the 'auto' estimate assumes: an episode of up to this many tokens (attention keeps heads × width floats per token). */
export const RECOMPUTE_ESTIMATE_ROW_TOKENS = 1024;

/**
 * What a LoRA training graph's backward pass would keep of one micro-batch if nothing were recomputed,
 * estimated per token and layer as the inputs of the seven projections and the SwiGLU block's
 * (≈ 6 hidden + 4 intermediate floats) plus the attention scores and probabilities (2 × heads × row
 * width floats), for `tokens` tokens in rows of `rowTokens` (float32).
 */
export function keptActivationBytes(config: ModelConfig, tokens: number, rowTokens: number = RECOMPUTE_ESTIMATE_ROW_TOKENS): number {
  const perTokenLayer = 6 * config.hiddenSize + 4 * config.intermediateSize + 2 * config.numHeads * Math.min(rowTokens, tokens);
  return tokens * config.numLayers * perTokenLayer * 4;
}

/**
 * The recompute setting a learner runs with: an explicit one as it is; 'auto' keeps everything when
 * the estimate stays under RECOMPUTE_ABOVE_BYTES (sqlenv-base, 4,096 tokens: ≈ 1.0 GB, and the GRPO
 * update is 1.25× faster than with layers recomputed; bench/results/train.md) and recomputes whole
 * layers above (Qwen3-0.6B: ≈ 23 GB).
 */
export function resolveRecompute(config: ModelConfig, microBatchTokens: number, setting: DecoderRecompute | 'auto'): DecoderRecompute {
  if (setting !== 'auto') return setting;
  return keptActivationBytes(config, microBatchTokens) > RECOMPUTE_ABOVE_BYTES ? 'layer' : 'none';
}

export interface TrainingGraph {
  graph: Graph;
  /** Names of the differentiated inputs (LoRA factors, or base weights for 'full') in declaration order; the gradient outputs follow it. */
  loraNames: string[];
  /** Whether the graph reads `ref_logprobs` (policy objective with klBeta > 0). */
  hasReference: boolean;
}

/**
 * The scoring graph (per-token log-probs with the LoRA factors as inputs) + a loss + its gradients
 * with respect to every LoRA factor, emitted as backward ONNX nodes by the graph library's autodiff.
 * Base weights are initializers, so only the adapter moves.
 *
 * Inputs (B, T) besides the scoring graph's: `token_weights` always; for the policy objective
 * `advantages`, `behaviour_logprobs`, `prox_logprobs`, the bool scalar `prox_from_current` (true: the
 * proximal policy is the current one, its log-probs the stop-gradient of this pass's) and, with a KL
 * term, `ref_logprobs`. Outputs: `loss`, `logprobs`, the counters and `grad/<lora name>`.
 */
export function buildTrainingGraph(config: ModelConfig, weights: ModelWeights, options: TrainingGraphOptions): TrainingGraph {
  const dtype = options.dtype ?? 'float32';
  const full = options.parameters === 'full';
  const scoring = buildScoringGraph(config, weights, {
    ...(full ? { trainableBase: true } : { lora: options.lora }),
    dtype,
    logprobGradient: full ? 'autodiff' : (options.logprobGradient ?? 'analytic'),
    recompute: full ? 'none' : (options.recompute ?? 'layer'),
    ...(options.vocabChunkSize === undefined ? {} : { vocabChunkSize: options.vocabChunkSize }),
  });
  const g = scoring.graph;
  const perToken = (name: string): Tensor => g.input(name, dtype, ['B', 'T']); // (B, T)
  const tokenWeights = perToken(TRAIN_IO.tokenWeights);
  let loss: Tensor;
  let hasReference = false;
  if (options.objective === 'sft') {
    loss = sftLoss(g, scoring.logprobs, tokenWeights);
  } else {
    if (options.loss === undefined) throw new Error('buildTrainingGraph: the policy objective needs loss settings');
    const advantages = perToken(TRAIN_IO.advantages);
    const behaviour = perToken(TRAIN_IO.behaviourLogprobs);
    const proxInput = perToken(TRAIN_IO.proxLogprobs);
    const proxFromCurrent = g.input(TRAIN_IO.proxFromCurrent, 'bool', []);
    const prox = g.where(proxFromCurrent, g.stopGradient(scoring.logprobs), proxInput); // (B, T)
    hasReference = options.loss.klBeta > 0;
    const out = policyLoss(
      g,
      { logprobs: scoring.logprobs, proxLogprobs: prox, behaviourLogprobs: behaviour, advantages, tokenWeights, ...(hasReference ? { refLogprobs: perToken(TRAIN_IO.refLogprobs) } : {}) },
      options.loss,
    );
    loss = out.loss;
    g.output(TRAIN_IO.clippedTokens, out.clippedTokens);
    g.output(TRAIN_IO.truncatedTokens, out.truncatedTokens);
    g.output(TRAIN_IO.kl, out.kl);
  }
  const trained = full ? scoring.params.baseInputs : scoring.params.loraInputs;
  const loraNames = [...trained.keys()];
  const grads = gradients(loss, [...trained.values()]);
  g.output(TRAIN_IO.loss, loss);
  loraNames.forEach((name, i) => g.output(TRAIN_IO.gradient(name), grads[i] as Tensor));
  return { graph: g, loraNames, hasReference };
}
