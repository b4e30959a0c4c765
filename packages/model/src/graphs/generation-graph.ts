import { Graph, tensor, type Tensor } from '@sqlenv/onnx-graph';
import { AppError, ErrorCode } from '@sqlenv/shared';
import type { ModelConfig } from '../io/config.ts';
import { attentionBiasAndPositions, declareDecoderParams, decoderForward, embedTokens, lmHeadLogits, type DecoderBuildOptions, type DecoderParams, type KvCache } from './decoder.ts';
import { STEP_IO } from './decode-step-graph.ts';
import { IO } from './forward-graphs.ts';
import { sampleNextToken } from './sampler-graph.ts';
import type { ModelWeights } from '../io/weights.ts';

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
  /** (B, S) int64: which slots of the past cache hold real tokens (S = 0: a fresh prefill). */
  pastMask: STEP_IO.pastMask,
  /** (B, S') int64: the mask of the cache after the run (`past_mask` + every slot fed in this run). */
  presentMask: 'present_mask',
  pastKey: STEP_IO.pastKey,
  pastValue: STEP_IO.pastValue,
  presentKey: STEP_IO.presentKey,
  presentValue: STEP_IO.presentValue,
} as const;

export interface GenerationGraph {
  graph: Graph;
  params: DecoderParams;
}

/** Prompt tokens per prefill iteration of the generation loop, unless a build asks for another. */
export const DEFAULT_PREFILL_CHUNK_TOKENS = 128;

export interface GenerationGraphOptions extends DecoderBuildOptions {
  /**
   * Prompt tokens the loop feeds per prefill iteration (≥ 1; default DEFAULT_PREFILL_CHUNK_TOKENS).
   * Each iteration's attention scores are (B, Hq, C, S) instead of the whole prompt's (B, Hq, P, P),
   * so a run's live memory grows with the context (the KV cache), not with its square
   * (estimateGenerationMemory, attention-memory.ts). `Infinity` feeds the whole prompt at once.
   */
  prefillChunkTokens?: number;
}

/**
 * Prefill + decode in one graph: one `run()` generates a whole turn for a
 * left-padded batch (docs/architecture.md: Node has no CUDA IO binding, so the KV cache
 * must never cross to JS between tokens).
 *
 * Inputs: `input_ids`, `attention_mask` (B, P) int64 — each row's tokens not
 * yet in its cache, left-padded; `past_mask` (B, S) int64 and per layer
 * `past_key.i` / `past_value.i` (B, Hkv, S, D) float32 — the cache of earlier
 * tokens (S = 0 for a fresh prefill); `uniforms` (B, N) float32 in [0, 1) —
 * one per row and step, N = most decode steps of this run (≥ 1);
 * `temperature`, `top_p` (B) float32; `top_k` () int64 (0 = off);
 * `stop_ids` (S ≥ 1) int64; LoRA A/B when built with `lora`.
 *
 * Outputs, (B, N') with N' ≤ N (the loop exits when every row has stopped):
 * `tokens` int64 (after a row's stop token: the pad id), `logprobs` and
 * `sample_logprobs` float32 (0 after the stop; see sampler-graph.ts); the
 * cache after the run, `present_mask` (B, S') and `present_key.i` /
 * `present_value.i` (B, Hkv, S', D): every slot fed in this run (the inputs
 * and the first N' − 1 sampled tokens; the last sampled token is not fed, so
 * a caller continues by feeding it against this cache). Callers that do not
 * keep the cache leave these outputs out of the run's fetches.
 *
 * One ONNX Loop whose body is the decoder. The prefill (the new tokens, against
 * the given cache: empty for a fresh prompt, an episode's earlier turns for a
 * continued one) is chunked: the first K = ⌈P / C⌉ iterations feed the new
 * tokens C at a time against the cache of what came before (the same causal attention as one pass over the whole
 * prompt, each query row seeing the same keys), and only the last of them
 * samples; later iterations feed the previous token. The KV caches, the
 * attention mask and the next input are loop-carried state. Chunking the
 * prompt outside the decoder bounds every activation of the prefill, not only
 * the scores (the SwiGLU block's (B, C, F) too), adds no node to the decode
 * step, and needs no operator beyond the default domain, so every provider
 * that runs the unchunked graph runs this one (tests/cuda-kernel-coverage.test.ts;
 * docs/inference.md). One copy of the decoder in the graph means every
 * weight has one consumer, so ONNX Runtime pre-packs it once and frees the
 * original (two copies — prefill outside, step inside — held 8 GB for
 * Qwen3-0.6B instead of the 6 GB budget).
 */
export function buildGenerationGraph(config: ModelConfig, weights: ModelWeights, options: GenerationGraphOptions = {}): GenerationGraph {
  const { prefillChunkTokens: chunk = DEFAULT_PREFILL_CHUNK_TOKENS, ...decoderOptions } = options;
  if (!(chunk >= 1 && (Number.isInteger(chunk) || chunk === Infinity))) {
    throw new AppError(ErrorCode.VALIDATION, `prefillChunkTokens must be an integer ≥ 1 or Infinity, got ${chunk}`);
  }
  const g = new Graph();
  const ids = g.input(IO.inputIds, 'int64', ['B', 'P']); // (B, P)
  const mask = g.input(IO.attentionMask, 'int64', ['B', 'P']); // (B, P)
  const uniforms = g.input(GEN_IO.uniforms, 'float32', ['B', 'N']); // (B, N)
  const temperature = g.input(GEN_IO.temperature, 'float32', ['B']); // (B)
  const topP = g.input(GEN_IO.topP, 'float32', ['B']); // (B)
  const topK = g.input(GEN_IO.topK, 'int64', []); // ()
  const stopIds = g.input(GEN_IO.stopIds, 'int64', ['stops']); // (stops)
  const { vocabSize: V, numKvHeads: Hkv, headDim: D } = config;
  const pastMaskIn = g.input(GEN_IO.pastMask, 'int64', ['B', 'S']); // (B, S)
  const pastIn: KvCache[] = [];
  for (let i = 0; i < config.numLayers; i++) {
    pastIn.push({
      k: g.input(GEN_IO.pastKey(i), 'float32', ['B', Hkv, 'S', D]), // (B, Hkv, S, D)
      v: g.input(GEN_IO.pastValue(i), 'float32', ['B', Hkv, 'S', D]), // (B, Hkv, S, D)
    });
  }
  const params = declareDecoderParams(g, config, weights, decoderOptions);

  const isStop = (b: Graph, token: Tensor): Tensor => {
    const hits = b.equal(b.unsqueeze(token, [1]), b.unsqueeze(stopIds, [0])); // (B, stops)
    return b.greater(b.reduceMax(b.cast(hits, 'float32'), [1]), 0); // (B)
  };

  // Prefill chunks K = ⌈P / C⌉ (one when the whole prompt goes at once); the loop runs K − 1 prefill-only
  // iterations, then one iteration per new token, the first of which also ends the prefill.
  const promptWidth = g.squeeze(g.shape(ids, 1, 2), [0]); // (): P
  const C = Number.isFinite(chunk) ? chunk : undefined;
  const chunks = C === undefined ? g.scalar(1, 'int64') : g.div(g.add(promptWidth, C - 1), C); // (): K
  const prefillOnly = g.sub(chunks, 1); // (): K − 1
  const promptChunk = (b: Graph, x: Tensor, index: Tensor | number): Tensor =>
    C === undefined ? x : b.slice(x, { axis: 1, start: b.mul(index, C), end: b.mul(b.add(index, 1), C) }); // (B, ≤ C), empty past P

  // Loop state: next input tokens, their mask, the mask and KV caches of earlier slots, done flags.
  const Tq = g.freshDim('T');
  const Sc = g.freshDim('S_past');
  const zero = g.scalar(0, 'int64');
  const loop = g.loop({
    maxTrips: g.add(prefillOnly, g.squeeze(g.shape(uniforms, 1, 2), [0])), // (): K − 1 + N
    cond: g.constant(tensor('bool', [], [true])),
    carried: [
      { init: promptChunk(g, ids, zero), shape: ['B', Tq] },
      { init: promptChunk(g, mask, zero), shape: ['B', Tq] },
      { init: pastMaskIn, shape: ['B', Sc] },
      g.fullLike(temperature, 0, 'bool'), // (B) done
      ...pastIn.flatMap((c) => [
        { init: c.k, shape: ['B', Hkv, Sc, D] },
        { init: c.v, shape: ['B', Hkv, Sc, D] },
      ]),
    ],
    body: (b, { iter, carried }) => {
      const [tokens, tokenMask, pastMask, done, ...flatCache] = carried as [Tensor, Tensor, Tensor, Tensor, ...Tensor[]];
      const past: KvCache[] = [];
      for (let i = 0; i < flatCache.length; i += 2) past.push({ k: flatCache[i] as Tensor, v: flatCache[i + 1] as Tensor });
      const { bias, positions } = attentionBiasAndPositions(b, tokenMask, pastMask); // (B, 1, 1, T, S), (B, T)
      const step = decoderForward(b, params, embedTokens(b, params, tokens), positions, bias, past); // (B, T, H)
      const last = b.gather(step.hidden, b.scalar(-1, 'int64'), 1); // (B, H): left padding puts every row's last token at the end
      const logits = lmHeadLogits(b, params, last); // (B, V)
      // Iterations before the prompt's last chunk sample too (one (B, V) head, negligible beside a chunk);
      // their draws are dropped and consume no uniform.
      const sampling = b.not(b.less(iter, prefillOnly)); // (): this iteration ends the prefill or decodes
      const draw = b.sub(iter, prefillOnly); // (): the new token's index, negative while prefilling
      const uniform = b.gather(uniforms, b.where(sampling, draw, zero), 1); // (B)
      const next = sampleNextToken(b, { logits, uniform, temperature, topP, topK }, V); // (B) each
      // Rows that already stopped emit padding with log-probability 0.
      const nextToken = b.where(done, b.scalar(config.padTokenId, 'int64'), next.token); // (B)
      const nextDone = b.and(sampling, b.or(done, isStop(b, nextToken))); // (B): no row stops while prefilling
      // The next input: the prompt's next chunk while one is left, else the token just drawn. Slice
      // clamps, so exactly one of the two parts is non-empty.
      const tokenColumn = b.unsqueeze(nextToken, [1]); // (B, 1)
      const tokenPart = b.slice(tokenColumn, { axis: 1, start: 0, end: b.cast(sampling, 'int64') }); // (B, 0 | 1)
      const nextInput = C === undefined ? tokenColumn : b.concat([promptChunk(b, ids, b.add(iter, 1)), tokenPart], 1); // (B, T')
      const nextMask = C === undefined ? b.fullLike(tokenColumn, 1) : b.concat([promptChunk(b, mask, b.add(iter, 1)), b.fullLike(tokenPart, 1)], 1); // (B, T')
      return {
        cond: b.or(b.not(sampling), b.greater(b.reduceSum(b.cast(b.not(nextDone), 'int64')), 0)), // continue while a row is running
        carried: [nextInput, nextMask, b.concat([pastMask, tokenMask], 1), nextDone, ...step.present.flatMap((c) => [c.k, c.v])],
        scans: [nextToken, b.where(done, b.scalar(0), next.logprob), b.where(done, b.scalar(0), next.sampleLogprob)],
      };
    },
  });

  // Scans hold one entry per iteration, (K − 1 + N', B): the prefill-only iterations' come first.
  const drawn = (scan: Tensor): Tensor => g.transpose(C === undefined ? scan : g.slice(scan, { axis: 0, start: prefillOnly, end: Infinity }), [1, 0]); // (B, N')
  const [scanTokens, scanLogprobs, scanSampleLogprobs] = loop.scans as [Tensor, Tensor, Tensor];
  g.output(GEN_IO.tokens, drawn(scanTokens)); // (B, N')
  g.output(GEN_IO.logprobs, drawn(scanLogprobs)); // (B, N')
  g.output(GEN_IO.sampleLogprobs, drawn(scanSampleLogprobs)); // (B, N')
  // The final loop state: the mask and caches hold every slot fed, the pending next input is not in them.
  const [, , presentMask, , ...presentCache] = loop.carried as [Tensor, Tensor, Tensor, Tensor, ...Tensor[]];
  g.output(GEN_IO.presentMask, presentMask); // (B, S')
  for (let i = 0; i < config.numLayers; i++) {
    g.output(GEN_IO.presentKey(i), presentCache[2 * i] as Tensor); // (B, Hkv, S', D)
    g.output(GEN_IO.presentValue(i), presentCache[2 * i + 1] as Tensor); // (B, Hkv, S', D)
  }
  return { graph: g, params };
}
