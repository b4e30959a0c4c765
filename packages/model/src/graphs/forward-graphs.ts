import { Graph, type Tensor } from '@sqlenv/onnx-graph';
import type { ModelConfig } from '../io/config.ts';
import { attentionBiasAndPositions, declareDecoderParams, decoderForward, embedTokens, lmHeadLogits, type DecoderBuildOptions, type DecoderParams } from './decoder.ts';
import type { ModelWeights } from '../io/weights.ts';

/** Graph input and output names shared by the graphs and their callers. */
export const IO = {
  inputIds: 'input_ids',
  attentionMask: 'attention_mask',
  temperature: 'temperature',
  logits: 'logits',
  logprobs: 'logprobs',
} as const;

export type ForwardGraphOptions = DecoderBuildOptions;

export interface ForwardGraph {
  graph: Graph;
  params: DecoderParams;
  /** Named inputs (ids, mask, …); LoRA inputs are in `params.loraInputs`. */
  inputs: Record<string, Tensor>;
  /** Normed final hidden states (B, T, H), for graphs that extend this one. */
  hidden: Tensor;
}

/**
 * The teacher-forced decoder over a left-padded batch: inputs `input_ids`
 * (B, T) int64 and `attention_mask` (B, T) int64 (1 = token, 0 = padding);
 * positions = cumsum(mask) − 1. No outputs yet: callers add theirs.
 */
export function buildDecoderTrunk(config: ModelConfig, weights: ModelWeights, options: ForwardGraphOptions = {}): ForwardGraph {
  const g = new Graph();
  const ids = g.input(IO.inputIds, 'int64', ['B', 'T']); // (B, T)
  const mask = g.input(IO.attentionMask, 'int64', ['B', 'T']); // (B, T)
  const params = declareDecoderParams(g, config, weights, options);
  const x = embedTokens(g, params, ids); // (B, T, H)
  const { bias, positions } = attentionBiasAndPositions(g, mask, undefined, params.dtype); // (B, 1, 1, T, T), (B, T)
  const { hidden } = decoderForward(g, params, x, positions, bias); // (B, T, H)
  return { graph: g, params, inputs: { [IO.inputIds]: ids, [IO.attentionMask]: mask }, hidden };
}

/** Full logits (B, T, V): for tests, the reference comparison and the `model logits` command (small models). */
export function buildLogitsGraph(config: ModelConfig, weights: ModelWeights, options: ForwardGraphOptions = {}): ForwardGraph {
  const trunk = buildDecoderTrunk(config, weights, options);
  const g = trunk.graph;
  const flat = g.reshape(trunk.hidden, [-1, config.hiddenSize]); // (B·T, H)
  const logits = g.reshape(lmHeadLogits(g, trunk.params, flat), ['B', 'T', config.vocabSize]); // (B, T, V)
  g.output(IO.logits, logits);
  return trunk;
}

export interface ScoringGraphOptions extends ForwardGraphOptions {
  /** Vocabulary columns per chunk of the lm head; the full (B·T, V) logits never exist at once. Default 8192. */
  vocabChunkSize?: number;
  /**
   * How a training graph gets d logprobs / d hidden through the vocabulary head (default 'autodiff').
   * 'autodiff': unrolled chunks of plain ops; `gradients()` differentiates them, so the backward pass
   * keeps every chunk's (N, chunk) logits alive from the forward (≈ 1.2 GB per 2k tokens at V = 152k).
   * 'analytic': an ONNX Loop over the chunks that also sums E = Σ softmax·W chunk by chunk, and the
   * gradient is wired in directly, d(target logit − logsumexp)/d(h/τ) = W[target] − E; nothing of
   * the size of the vocabulary outlives its loop iteration. Costs one more (N, chunk)·(chunk, H)
   * product per chunk in the forward, so pure scoring keeps 'autodiff' (whose backward is never built).
   */
  logprobGradient?: 'autodiff' | 'analytic';
}

/**
 * Per-token log-probabilities of the given tokens under the (temperature-
 * scaled) model: logprobs[b, t] = log softmax(logits[b, t−1] / τ)[ids[b, t]]
 * where slots t − 1 and t both hold real tokens; 0 elsewhere (padding and
 * each row's first token). Input `temperature` is a float32 scalar (1 =
 * the model itself; use the sampling temperature to match generation).
 *
 * log softmax is target_logit − logsumexp over the vocabulary, and the
 * logsumexp is assembled from vocabulary chunks (logsumexp of per-chunk
 * logsumexps), so only (B·T, chunk) logits are alive at a time. Built from
 * differentiable primitives only, so a training graph can add a loss on
 * `logprobs` and call `gradients()`.
 */
export function buildScoringGraph(config: ModelConfig, weights: ModelWeights, options: ScoringGraphOptions = {}): ForwardGraph & { logprobs: Tensor } {
  const trunk = buildDecoderTrunk(config, weights, options);
  const g = trunk.graph;
  const ids = trunk.inputs[IO.inputIds] as Tensor;
  const temperature = g.input(IO.temperature, trunk.params.dtype, []); // ()
  trunk.inputs[IO.temperature] = temperature;
  const { hiddenSize: H, vocabSize: V } = config;
  const chunk = Math.min(options.vocabChunkSize ?? 8192, V);

  // Position t predicts token t + 1. Shifts are GatherElements with clamped indices rather
  // than Slices, so every tensor keeps the symbolic (B, T) shape of the inputs.
  const pos = g.sub(g.cumSum(g.fullLike(ids, 1), 1), 1); // (B, T): 0 … T−1
  const lastPos = g.sub(g.shape(ids, 1, 2), 1); // (1): T − 1
  const nextIdx = g.where(g.less(pos, lastPos), g.add(pos, 1), lastPos); // (B, T)
  const nextIds = g.gatherElements(ids, nextIdx, 1); // (B, T): ids[t+1] (last column: unused)

  const states = g.reshape(trunk.hidden, [-1, H]); // (N, H), N = B·T
  const targets = g.reshape(nextIds, [-1]); // (N)
  const scaled = g.div(states, temperature); // (N, H): (h/τ)·Wᵀ = (h·Wᵀ)/τ
  const targetRows = g.gather(trunk.params.lmHead, targets, 0); // (N, H)
  const targetLogit = g.reduceSum(g.mul(scaled, targetRows), [1], { keepDims: true }); // (N, 1)
  const lse = options.logprobGradient === 'analytic' ? analyticLogSumExp(g, scaled, trunk.params.lmHead, chunk) : unrolledLogSumExp(g, scaled, trunk.params.lmHead, chunk); // (N, 1)
  const nextLogprobs = g.reshapeAs(g.sub(targetLogit, lse), ids); // (B, T): log p(ids[t+1] | ids[≤t])
  const prevIdx = g.where(g.greater(pos, 0), g.sub(pos, 1), 0); // (B, T)
  const shifted = g.gatherElements(nextLogprobs, prevIdx, 1); // (B, T): log p(ids[t] | ids[<t])
  // Only tokens with a real token before them get a log-prob: padding and each row's first token
  // get 0, and Where stops gradients from flowing into the fully masked padding rows.
  const mask = trunk.inputs[IO.attentionMask] as Tensor;
  const prevReal = g.and(g.greater(pos, 0), g.greater(g.gatherElements(mask, prevIdx, 1), 0)); // (B, T)
  const logprobs = g.where(g.and(prevReal, g.greater(mask, 0)), shifted, 0); // (B, T)
  g.output(IO.logprobs, logprobs);
  return { ...trunk, logprobs };
}

/** logsumexp over the vocabulary of scaled·Wᵀ from unrolled chunks: differentiable by `gradients()` (which keeps each chunk's logits). */
function unrolledLogSumExp(g: Graph, scaled: Tensor, lmHead: Tensor, chunk: number): Tensor {
  const V = lmHead.shape[0] as number;
  const chunkLse: Tensor[] = [];
  for (let start = 0; start < V; start += chunk) {
    const rows = g.slice(lmHead, { axis: 0, start, end: Math.min(start + chunk, V) }); // (C, H)
    const logits = g.gemm(scaled, rows, null, { transB: true }); // (N, C)
    chunkLse.push(g.reduceLogSumExp(logits, [1], { keepDims: true })); // (N, 1)
  }
  return chunkLse.length === 1 ? (chunkLse[0] as Tensor) : g.reduceLogSumExp(g.concat(chunkLse, 1), [1], { keepDims: true }); // (N, 1)
}

/**
 * logsumexp over the vocabulary of scaled·Wᵀ whose gradient is given in closed form:
 * d lse / d scaled = Σ_v softmax_v·W_v = E. One Loop iteration per chunk of W (its rows sliced at
 * run time, so ONNX Runtime can neither constant-fold a copy of the tied embedding nor hold two chunks
 * at once) keeps a running logsumexp and a running E, rescaled as the maximum moves (the online-softmax
 * recurrence). The returned value is sg(lse) + (d − sg(d)) with d = rowsum(scaled ⊙ sg(E)): equal to lse,
 * and its gradient w.r.t. scaled is E, so `gradients()` never enters the Loop and the backward pass
 * keeps only E (N, H).
 */
function analyticLogSumExp(g: Graph, scaled: Tensor, lmHead: Tensor, chunk: number): Tensor {
  const V = lmHead.shape[0] as number;
  const input = g.stopGradient(scaled); // (N, H)
  const { carried } = g.loop({
    maxTrips: Math.ceil(V / chunk),
    carried: [
      g.fullLike(g.slice(input, { axis: 1, start: 0, end: 1 }), -1e30), // (N, 1) running lse from "log 0" (finite: no inf − inf)
      g.fullLike(input, 0), // (N, H) running E
    ],
    body: (b, { iter, carried: [lseAcc, eAcc] }) => {
      const start = b.mul(iter, chunk); // () int64
      const rows = b.slice(lmHead, { axis: 0, start, end: b.add(start, chunk) }); // (C, H), the last chunk shorter
      const logits = b.gemm(input, rows, null, { transB: true }); // (N, C)
      const chunkLse = b.reduceLogSumExp(logits, [1], { keepDims: true }); // (N, 1)
      const chunkE = b.matMul(b.exp(b.sub(logits, chunkLse)), rows); // (N, H): Σ over the chunk of softmax_chunk·W
      const next = b.reduceLogSumExp(b.concat([lseAcc as Tensor, chunkLse], 1), [1], { keepDims: true }); // (N, 1)
      const e = b.add(b.mul(eAcc as Tensor, b.exp(b.sub(lseAcc as Tensor, next))), b.mul(chunkE, b.exp(b.sub(chunkLse, next)))); // (N, H)
      return { carried: [next, e] };
    },
  });
  const [lse, expected] = [g.stopGradient(carried[0] as Tensor), g.stopGradient(carried[1] as Tensor)]; // (N, 1), (N, H)
  const d = g.reduceSum(g.mul(scaled, expected), [1], { keepDims: true }); // (N, 1)
  return g.add(lse, g.sub(d, g.stopGradient(d))); // (N, 1): value lse, gradient E
}
