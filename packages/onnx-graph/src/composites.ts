import type { DType } from './dtype.ts';
import type { Tensor } from './graph-core.ts';
import { Graph } from './graph.ts';
import { graphError, normalizeAxis, type Dim } from './shape.ts';

/**
 * Composite layers built only from primitive ops, so they need no gradient
 * rules of their own (micrograd/tinygrad style). Each takes its graph from its
 * first tensor argument.
 */

/** Large negative used for masked-out attention scores: exp() of it is 0, and it stays finite. */
export const MASK_VALUE = { float32: -1e9, float64: -1e9, float16: -6e4 } as const;

function graphOf(x: Tensor): Graph {
  if (!(x.graph instanceof Graph)) throw graphError(`tensor ${x.toString()} does not belong to a Graph builder`);
  return x.graph;
}

function maskValue(dtype: DType): number {
  if (dtype === 'float32' || dtype === 'float64' || dtype === 'float16') return MASK_VALUE[dtype];
  throw graphError(`mask: expected a float tensor, got ${dtype}`);
}

/** SiLU / swish: x·σ(x) (Elfwing et al. 2017; Qwen's SwiGLU gate). */
export function silu(x: Tensor): Tensor {
  const g = graphOf(x);
  return g.mul(x, g.sigmoid(x));
}

export interface RmsNormOptions {
  /** Added to the mean square (default 1e-6, Qwen). */
  eps?: number;
  /** Compute the normalisation in this dtype, casting back after (Qwen/HF: float32). Default: x's dtype. */
  computeDtype?: DType;
}

/**
 * RMSNorm over the last axis (Zhang & Sennrich 2019): x / sqrt(mean(x²) + eps) · weight.
 * HF Llama/Qwen order: normalise (in float32), cast back to the input dtype, then scale.
 */
export function rmsNorm(x: Tensor, weight: Tensor, options: RmsNormOptions = {}): Tensor {
  const g = graphOf(x);
  const eps = options.eps ?? 1e-6;
  const compute = options.computeDtype ?? x.dtype;
  const xc = compute === x.dtype ? x : g.cast(x, compute); // (..., D)
  const meanSquare = g.reduceMean(g.mul(xc, xc), [-1], { keepDims: true }); // (..., 1)
  const normed = g.mul(xc, g.reciprocal(g.sqrt(g.add(meanSquare, eps)))); // (..., D)
  const back = compute === x.dtype ? normed : g.cast(normed, x.dtype);
  return g.mul(back, weight);
}

/**
 * y = x·Wᵀ + b with W stored [out, in] (PyTorch/HF layout), as one Gemm(transB) over
 * the flattened leading dims: the runtime pre-packs W, and the backward pass is two
 * plain 2-D Gemms (dX = dY·W, dW = dYᵀ·X) with no batched products to sum or transposes to copy.
 */
export function linear(x: Tensor, weight: Tensor, bias?: Tensor): Tensor {
  const g = graphOf(x);
  if (weight.rank !== 2) throw graphError(`linear: expected a 2-D weight [out, in], got ${weight.toString()}`);
  const [out, inner] = weight.shape as [Dim, Dim];
  if (x.rank < 1 || x.shape[x.rank - 1] !== inner) throw graphError(`linear: expected input last dim ${String(inner)} (from weight ${weight.toString()}), got ${x.toString()}`);
  const flat = x.rank === 2 ? x : g.reshape(x, [-1, inner]); // (N, in)
  const y = g.gemm(flat, weight, bias ?? null, { transB: true }); // (N, out)
  return x.rank === 2 ? y : g.reshape(y, [...x.shape.slice(0, -1), out]); // (..., out)
}

/**
 * Softmax over `axis` with a mask: a bool mask (true = keep) replaces masked scores
 * by a large negative; a float mask is added (0 = keep, large negative = drop).
 */
export function maskedSoftmax(scores: Tensor, mask: Tensor, axis = -1): Tensor {
  const g = graphOf(scores);
  const masked = mask.dtype === 'bool' ? g.where(mask, scores, maskValue(scores.dtype)) : g.add(scores, mask);
  return g.softmax(masked, axis);
}

/** log-softmax as x − logsumexp(x): the form that also runs on WebGPU (no LogSoftmax kernel there). */
export function logSoftmaxLse(x: Tensor, axis = -1): Tensor {
  const g = graphOf(x);
  return g.sub(x, g.reduceLogSumExp(x, [axis], { keepDims: true }));
}

export interface LogProbOptions {
  /** Use x − logsumexp(x) instead of the LogSoftmax op (default true: portable to WebGPU). */
  lse?: boolean;
}

/** log p(token) for each position: logits (..., V), tokens int64 (...) -> (...). */
export function tokenLogProbs(logits: Tensor, tokens: Tensor, options: LogProbOptions = {}): Tensor {
  const g = graphOf(logits);
  if (tokens.rank !== logits.rank - 1) throw graphError(`tokenLogProbs: expected tokens of rank ${logits.rank - 1} for logits ${logits.toString()}, got ${tokens.toString()}`);
  const logp = options.lse === false ? g.logSoftmax(logits, -1) : logSoftmaxLse(logits, -1); // (..., V)
  const picked = g.gatherElements(logp, g.unsqueeze(tokens, [-1]), -1); // (..., 1)
  return g.squeeze(picked, [-1]); // (...)
}

export interface CrossEntropyOptions extends LogProbOptions {
  /** Per-position weights (e.g. a 0/1 loss mask), same shape as targets, logits' dtype. */
  weights?: Tensor;
  /** 'mean' (default; weighted mean when weights are given), 'sum', or 'none' (per position). */
  reduction?: 'mean' | 'sum' | 'none';
}

/** Cross-entropy −log p(target): logits (..., V), targets int64 (...). */
export function crossEntropy(logits: Tensor, targets: Tensor, options: CrossEntropyOptions = {}): Tensor {
  const g = graphOf(logits);
  let nll = g.neg(tokenLogProbs(logits, targets, options)); // (...)
  if (options.weights) nll = g.mul(nll, options.weights);
  const reduction = options.reduction ?? 'mean';
  if (reduction === 'none') return nll;
  const total = g.reduceSum(nll); // ()
  if (reduction === 'sum') return total;
  const count = options.weights ? g.reduceSum(options.weights) : g.cast(g.size(nll), logits.dtype);
  return g.div(total, count);
}

/** Additive causal mask (T, T): 0 on and below the diagonal, a large negative above. */
export function causalMask(g: Graph, t: Dim, dtype: DType = 'float32'): Tensor {
  return g.trilu(g.full([t, t], maskValue(dtype), dtype), { upper: true, k: 1 });
}

/**
 * Scaled dot-product attention (Vaswani et al. 2017): softmax(q·kᵀ/√d + mask)·v.
 * q (..., T, D), k and v (..., S, D), mask broadcastable to (..., T, S): bool (true = keep) or additive.
 */
export function attention(q: Tensor, k: Tensor, v: Tensor, mask?: Tensor): Tensor {
  const g = graphOf(q);
  const d = q.shape[normalizeAxis(-1, q.rank, 'attention')];
  if (typeof d !== 'number') throw graphError(`attention: expected a static head dim, got ${q.toString()}`);
  const perm = k.shape.map((_, i) => i);
  [perm[k.rank - 1], perm[k.rank - 2]] = [k.rank - 2, k.rank - 1];
  const scores = g.mul(g.matMul(q, g.transpose(k, perm)), 1 / Math.sqrt(d)); // (..., T, S)
  const probs = mask ? maskedSoftmax(scores, mask) : g.softmax(scores); // (..., T, S)
  return g.matMul(probs, v); // (..., T, D)
}
