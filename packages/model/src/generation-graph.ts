import { Graph, type Tensor } from '@sqlenv/onnx-graph';
import type { ModelConfig } from './config.ts';
import {
  causalPaddingBias,
  declareDecoderParams,
  decoderForward,
  embedTokens,
  lmHeadLogits,
  paddingBias,
  positionsFromMask,
  type DecoderParams,
  type KvCache,
} from './decoder.ts';
import { IO } from './forward-graphs.ts';
import type { LoraConfig } from './lora.ts';
import { sampleNextToken, type SampledToken } from './sampler-graph.ts';
import type { ModelWeights } from './weights.ts';

/** Inputs and outputs of the generation graph beyond `input_ids` / `attention_mask`. */
export const GEN_IO = {
  uniforms: 'uniforms',
  temperature: 'temperature',
  topP: 'top_p',
  topK: 'top_k',
  stopIds: 'stop_ids',
  tokens: 'tokens',
  logprobs: 'logprobs',
  sampleLogprobs: 'sample_logprobs',
} as const;

export interface GenerationGraph {
  graph: Graph;
  params: DecoderParams;
}

/**
 * Prefill + decode in one graph: one `run()` generates a whole turn for a
 * left-padded batch (DESIGN.md: Node has no CUDA IO binding, so the KV cache
 * must never cross to JS between tokens).
 *
 * Inputs: `input_ids`, `attention_mask` (B, P) int64; `uniforms` (B, N)
 * float32 in [0, 1) — one per row and step, N = max new tokens (≥ 1);
 * `temperature`, `top_p` (B) float32; `top_k` () int64 (0 = off);
 * `stop_ids` (S ≥ 1) int64; LoRA A/B when built with `lora`.
 *
 * Outputs, (B, N') with N' ≤ N (the loop exits when every row has stopped):
 * `tokens` int64 (after a row's stop token: the pad id), `logprobs` and
 * `sample_logprobs` float32 (0 after the stop; see sampler-graph.ts).
 *
 * The first token comes from the prefill; an ONNX Loop then runs N − 1 decode
 * steps with the per-layer KV caches and the attention mask as loop-carried
 * state, each step appending one column.
 */
export function buildGenerationGraph(config: ModelConfig, weights: ModelWeights, options: { lora?: LoraConfig } = {}): GenerationGraph {
  const g = new Graph();
  const ids = g.input(IO.inputIds, 'int64', ['B', 'P']); // (B, P)
  const mask = g.input(IO.attentionMask, 'int64', ['B', 'P']); // (B, P)
  const uniforms = g.input(GEN_IO.uniforms, 'float32', ['B', 'N']); // (B, N)
  const temperature = g.input(GEN_IO.temperature, 'float32', ['B']); // (B)
  const topP = g.input(GEN_IO.topP, 'float32', ['B']); // (B)
  const topK = g.input(GEN_IO.topK, 'int64', []); // ()
  const stopIds = g.input(GEN_IO.stopIds, 'int64', ['S']); // (S)
  const params = declareDecoderParams(g, config, weights, options.lora);
  const { vocabSize: V, hiddenSize: H } = config;

  const sample = (b: Graph, logits: Tensor, step: Tensor): SampledToken =>
    sampleNextToken(b, { logits, uniform: b.gather(uniforms, step, 1), temperature, topP, topK }, V);
  const isStop = (b: Graph, token: Tensor): Tensor => {
    const hits = b.equal(b.unsqueeze(token, [1]), b.unsqueeze(stopIds, [0])); // (B, S)
    return b.greater(b.reduceMax(b.cast(hits, 'float32'), [1]), 0); // (B)
  };

  // --- prefill: the whole prompt, first new token ---
  const prefill = decoderForward(g, params, embedTokens(g, params, ids), positionsFromMask(g, mask), causalPaddingBias(g, mask)); // (B, P, H)
  const last = g.gather(prefill.hidden, g.scalar(-1, 'int64'), 1); // (B, H): left padding puts every row's last token at the end
  const first = sample(g, lmHeadLogits(g, params, last), g.scalar(0, 'int64')); // (B) each
  const firstDone = isStop(g, first.token); // (B)

  // --- decode loop: state = (last token, done, mask, caches) ---
  const S = g.freshDim('S');
  const cacheShape = ['B', config.numKvHeads, S, config.headDim];
  const steps = g.sub(g.squeeze(g.shape(uniforms, 1, 2), [0]), 1); // (): N − 1
  const loop = g.loop({
    maxTrips: steps,
    cond: notAllDone(g, firstDone),
    carried: [
      first.token,
      firstDone,
      { init: mask, shape: ['B', S] },
      ...prefill.present.flatMap((c) => [
        { init: c.k, shape: cacheShape },
        { init: c.v, shape: cacheShape },
      ]),
    ],
    body: (b, { iter, carried }) => {
      const [token, done, pastMask, ...flatCache] = carried as [Tensor, Tensor, Tensor, ...Tensor[]];
      const past: KvCache[] = [];
      for (let i = 0; i < flatCache.length; i += 2) past.push({ k: flatCache[i] as Tensor, v: flatCache[i + 1] as Tensor });
      const stepMask = b.concat([pastMask, b.unsqueeze(b.fullLike(token, 1), [1])], 1); // (B, S+1)
      const position = b.sub(b.reduceSum(stepMask, [1], { keepDims: true }), 1); // (B, 1): cumsum(mask) − 1 at the new slot
      const x = embedTokens(b, params, b.unsqueeze(token, [1])); // (B, 1, H)
      const step = decoderForward(b, params, x, position, paddingBias(b, stepMask), past); // (B, 1, H)
      const logits = lmHeadLogits(b, params, b.reshape(step.hidden, [-1, H])); // (B, V)
      const next = sample(b, logits, b.add(iter, 1)); // (B) each
      // Rows that already stopped emit padding with log-probability 0.
      const nextToken = b.where(done, b.scalar(config.padTokenId, 'int64'), next.token); // (B)
      const nextDone = b.or(done, isStop(b, nextToken)); // (B)
      return {
        cond: notAllDone(b, nextDone),
        carried: [nextToken, nextDone, stepMask, ...step.present.flatMap((c) => [c.k, c.v])],
        scans: [nextToken, b.where(done, b.scalar(0), next.logprob), b.where(done, b.scalar(0), next.sampleLogprob)],
      };
    },
  });

  // (B, 1) from the prefill + (B, N − 1) from the loop
  const [scanTokens, scanLogprobs, scanSampleLogprobs] = loop.scans as [Tensor, Tensor, Tensor]; // (N', B) each
  const join = (head: Tensor, scan: Tensor): Tensor => g.concat([g.unsqueeze(head, [1]), g.transpose(scan, [1, 0])], 1); // (B, 1 + N')
  g.output(GEN_IO.tokens, join(first.token, scanTokens));
  g.output(GEN_IO.logprobs, join(first.logprob, scanLogprobs));
  g.output(GEN_IO.sampleLogprobs, join(first.sampleLogprob, scanSampleLogprobs));
  return { graph: g, params };
}

/** Continue while some row has not stopped: () bool. */
function notAllDone(g: Graph, done: Tensor): Tensor {
  return g.greater(g.reduceSum(g.cast(g.not(done), 'int64')), 0);
}
