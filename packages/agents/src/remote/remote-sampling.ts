/**
 * Why a remote source cannot sample with these settings, or null. A
 * trajectory records log softmax(logits / T) over the whole vocabulary; a
 * vLLM server started with `--logprobs-mode processed_logprobs` returns that
 * only when nothing truncates the distribution (top-p 1, top-k off).
 */
export function remoteSamplingProblem(sampling: { topP: number; topK: number }): string | null {
  const truncated = [sampling.topP < 1 ? `top-p ${sampling.topP}` : null, sampling.topK > 0 ? `top-k ${sampling.topK}` : null].filter((t) => t !== null);
  if (truncated.length === 0) return null;
  return `${truncated.join(' and ')} with a remote inference source: the servers' processed log-probs are log softmax(logits / T) over the full vocabulary only with top-p 1 and top-k off, so a trajectory sampled with ${truncated.join(' and ')} would record log-probs of another distribution than the one sampled; sample remotely with top-p 1 and top-k off, or in process`;
}
