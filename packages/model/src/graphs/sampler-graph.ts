import type { Graph, Tensor } from '@sqlenv/onnx-graph';

/**
 * Next-token sampling inside the graph, one uniform number per row and step
 * (inverse-CDF sampling), so a run is reproducible from the uniforms the
 * caller passes in (seeded in JS) and rows are independent of their batch.
 *
 * Order as in transformers' LogitsProcessor chain and vLLM: temperature,
 * then top-k, then top-p over the top-k renormalised distribution
 * (Holtzman et al. 2019, https://arxiv.org/abs/1904.09751). Temperature ≤ 0
 * means greedy (argmax).
 *
 * `logprob` is log softmax(logits / τ) at the chosen token (τ = 1 for greedy
 * rows): the policy's probability that the scoring graph reproduces at the
 * same temperature, and what GRPO's importance ratio uses. `sampleLogprob` is
 * the log-probability under the truncated (top-k / top-p) distribution that
 * was actually sampled (0 for greedy rows).
 */
export interface SamplerInputs {
  logits: Tensor; // (B, V)
  uniform: Tensor; // (B) in [0, 1)
  temperature: Tensor; // (B)
  topP: Tensor; // (B) in (0, 1]
  topK: Tensor; // () int64, 0 = off
}

export interface SampledToken {
  token: Tensor; // (B) int64
  logprob: Tensor; // (B)
  sampleLogprob: Tensor; // (B)
}

export function sampleNextToken(g: Graph, inputs: SamplerInputs, vocabSize: number): SampledToken {
  const { logits, uniform, temperature, topP, topK } = inputs;
  const greedy = g.not(g.greater(temperature, 0)); // (B)
  const tau = g.unsqueeze(g.where(greedy, g.scalar(1), temperature), [1]); // (B, 1)
  const scaled = g.div(logits, tau); // (B, V)
  const lse = g.reduceLogSumExp(scaled, [1], { keepDims: true }); // (B, 1)
  const logp = g.sub(scaled, lse); // (B, V)
  const u = g.unsqueeze(uniform, [1]); // (B, 1)

  // Untruncated rows: inverse CDF over the vocabulary in index order, O(V), no sort.
  const cdf = g.cumSum(g.exp(logp), 1); // (B, V)
  const total = g.slice(cdf, { axis: 1, start: -1, end: Infinity }); // (B, 1)
  const below = g.reduceSum(g.cast(g.not(g.greater(cdf, g.mul(u, total))), 'int64'), [1]); // (B): #{j: cdf_j ≤ u·total}
  const plainToken = g.where(g.greater(below, vocabSize - 1), vocabSize - 1, below); // (B)

  // Truncated rows: sort the k largest (k = top_k, or V when only top-p is set, or 1 when
  // nothing truncates, so untruncated batches pay no sort), then nucleus on the sorted list.
  const topKClamped = g.where(g.greater(topK, vocabSize), vocabSize, topK); // ()
  const anyTopP = g.greater(g.reduceMax(g.cast(g.less(topP, 1), 'float32')), 0); // ()
  const k = g.where(g.greater(topK, 0), topKClamped, g.where(anyTopP, g.scalar(vocabSize, 'int64'), 1)); // ()
  const { values, indices } = g.topK(scaled, k, { axis: 1 }); // (B, K) each, sorted descending
  const pK = g.softmax(values, -1); // (B, K) renormalised over the top k
  const massBefore = g.cumSum(pK, 1, { exclusive: true }); // (B, K)
  const keep = g.less(massBefore, g.unsqueeze(topP, [1])); // (B, K): the first always stays
  const kept = g.where(keep, pK, 0); // (B, K)
  const cdfK = g.cumSum(kept, 1); // (B, K)
  const totalK = g.slice(cdfK, { axis: 1, start: -1, end: Infinity }); // (B, 1)
  const belowK = g.reduceSum(g.cast(g.and(keep, g.not(g.greater(cdfK, g.mul(u, totalK)))), 'int64'), [1]); // (B)
  const lastKept = g.sub(g.reduceSum(g.cast(keep, 'int64'), [1]), 1); // (B)
  const slot = g.unsqueeze(g.where(g.greater(belowK, lastKept), lastKept, belowK), [1]); // (B, 1)
  const truncToken = g.squeeze(g.gatherElements(indices, slot, 1), [1]); // (B)
  const truncLogprob = g.squeeze(g.log(g.div(g.gatherElements(kept, slot, 1), totalK)), [1]); // (B)

  const truncate = g.or(g.greater(g.expandAs(topK, topP), 0), g.less(topP, 1)); // (B)
  const greedyToken = g.argMax(scaled, 1); // (B)
  const token = g.where(greedy, greedyToken, g.where(truncate, truncToken, plainToken)); // (B)
  const logprob = g.squeeze(g.gatherElements(logp, g.unsqueeze(token, [1]), 1), [1]); // (B)
  const sampleLogprob = g.where(greedy, g.scalar(0), g.where(truncate, truncLogprob, logprob)); // (B)
  return { token, logprob, sampleLogprob };
}
