import { Graph, type Dim, type Tensor } from '@sqlenv/onnx-graph';
import { AppError, ErrorCode } from '@sqlenv/shared';
import type { ModelConfig } from '../io/config.ts';
import {
  applyRope,
  declareDecoderParams,
  embedTokens,
  linear,
  lmHeadLogits,
  MASKED_BIAS,
  mlp,
  fusableRmsNorm,
  rmsNorm,
  ropeTables,
  type DecoderBuildOptions,
  type DecoderParams,
  type KvCache,
  type LayerParams,
} from './decoder.ts';
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
  /** (B, S') int64: the mask of the slots this run added to the cache (every token fed in this run), S' = P + N' − 1. */
  presentMask: 'present_mask',
  pastKey: STEP_IO.pastKey,
  pastValue: STEP_IO.pastValue,
  presentKey: STEP_IO.presentKey,
  presentValue: STEP_IO.presentValue,
  /** () bool: whether the run returns the slots it added in `present_key.i` / `present_value.i` (else they are empty). */
  keepCache: 'keep_cache',
  /**
   * () int64: the decode loop goes on while more than this many rows are still running (0: until every
   * row has stopped or N steps). The turn scheduler ends a chunk early once enough of its rows have
   * stopped, so they leave and waiting turns join; rows still running continue in the next run.
   */
  minRunning: 'min_running',
} as const;

export interface GenerationGraph {
  graph: Graph;
  params: DecoderParams;
}

/** Prompt tokens per prefill chunk of the generation graph, unless a build asks for another. */
export const DEFAULT_PREFILL_CHUNK_TOKENS = 128;

export interface GenerationGraphOptions extends DecoderBuildOptions {
  /**
   * Prompt tokens per prefill chunk: the queries each layer takes at once (≥ 1; default DEFAULT_PREFILL_CHUNK_TOKENS).
   * A chunk's attention scores are (B, Hq, C, S) instead of the whole prompt's (B, Hq, P, P),
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
 * `stop_ids` (S ≥ 1) int64; `min_running` () int64 (0: decode until every
 * row has stopped); LoRA A/B when built with `lora`.
 *
 * Outputs, (B, N') with N' ≤ N (the loop exits once no more than
 * `min_running` rows are still running):
 * `tokens` int64 (after a row's stop token: the pad id), `logprobs` and
 * `sample_logprobs` float32 (0 after the stop; see sampler-graph.ts); what
 * the run added to the cache, `present_mask` (B, S') and `present_key.i` /
 * `present_value.i` (B, Hkv, S', D), S' = P + N' − 1: every slot fed in this
 * run (the inputs and the first N' − 1 sampled tokens; the last sampled token
 * is not fed, so a caller continues by feeding it against the past and these
 * slots, appended after it: Generator.runRows does). They hold keys and
 * values only when `keep_cache` () bool is true (empty otherwise: ONNX Runtime
 * computes every output whether fetched or not, and a run that does not keep
 * its cache should not hold it twice at its end).
 *
 * The prefill (the new tokens, against the given cache: empty for a fresh
 * prompt, an episode's earlier turns for a continued one) runs one layer after
 * another: the layer's keys and values of all new tokens are computed once and
 * kept beside its past as fed — never concatenated to it, which would copy the
 * whole cache once more — and its queries go through the layer C at a time in
 * an inner Loop (the same causal attention as one pass over the whole prompt,
 * one softmax over the past's and the new slots' scores: a chunk reads the new
 * slots up to its last query; scores (B, Hq, C, ≤ S + P) and the SwiGLU block's
 * (B, C, F) instead of the whole prompt's). The first token is sampled from the
 * last position; the decode Loop feeds the token drawn before it and carries
 * only the keys and values it decodes, reading the past and the prompt's from
 * the outer scope, so the cache is held once inside the run and once more in
 * the present outputs when they are asked for (a loop-carried cache was held
 * three times at the end of a run: docs/inference.md, "Memory of a run"). Default-domain operators
 * only, so every provider that runs the unchunked graph runs this one
 * (tests/cuda-kernel-coverage.test.ts). The prefill loops and the decode loop
 * each consume every weight: with ORT's pre-packing on, each packs its own
 * copy, so big models run with `session.disable_prepacking` (one copy).
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
  const keepCache = g.input(GEN_IO.keepCache, 'bool', []); // ()
  const minRunning = g.input(GEN_IO.minRunning, 'int64', []); // ()
  const { vocabSize: V, hiddenSize: H, numHeads: Hq, numKvHeads: Hkv, headDim: D, rmsNormEps: eps } = config;
  const R = Hq / Hkv;
  // The prefill keeps the x·x RMSNorm; the decode loop uses the form ONNX Runtime fuses, where it was
  // measured to help. (A slowdown once blamed on the fused form in the prefill came from ORT's CPU arena
  // being off; the fused prefill was not measured again: docs/inference.md, "Fewer nodes per step".)
  type Norm = typeof rmsNorm;
  const pastMaskIn = g.input(GEN_IO.pastMask, 'int64', ['B', 'S']); // (B, S)
  const pastIn: KvCache[] = [];
  for (let i = 0; i < config.numLayers; i++) {
    pastIn.push({
      k: g.input(GEN_IO.pastKey(i), 'float32', ['B', Hkv, 'S', D]), // (B, Hkv, S, D)
      v: g.input(GEN_IO.pastValue(i), 'float32', ['B', Hkv, 'S', D]), // (B, Hkv, S, D)
    });
  }
  const params = declareDecoderParams(g, config, weights, decoderOptions);
  const length = (b: Graph, x: Tensor, axis: number): Tensor => b.squeeze(b.shape(x, axis, axis + 1), [0]); // () int64
  const column = (b: Graph, x: Tensor): Tensor => b.unsqueeze(x, [1]); // (B) → (B, 1)
  const isStop = (b: Graph, token: Tensor): Tensor => {
    const hits = b.equal(b.unsqueeze(token, [1]), b.unsqueeze(stopIds, [0])); // (B, stops)
    return b.greater(b.reduceMax(b.cast(hits, 'float32'), [1]), 0); // (B)
  };
  const anyRunning = (b: Graph, done: Tensor): Tensor => b.greater(b.reduceSum(b.cast(b.not(done), 'int64')), minRunning); // (): more than min_running rows still running
  /** Queries grouped by kv head, scaled: (B, T, Hq·D) projections → (B, Hkv, R, T, D). */
  const groupQueries = (b: Graph, q: Tensor): Tensor => b.transpose(b.reshape(b.mul(q, 1 / Math.sqrt(D)), [0, 0, Hkv, R, D]), [0, 2, 3, 1, 4]);
  const projectQ = (b: Graph, norm: Norm, layer: LayerParams, h: Tensor, rope: { cos: Tensor; sin: Tensor }): Tensor => {
    let q = b.reshape(linear(b, params, h, layer.q), [0, 0, Hq, D]); // (B, T, Hq, D)
    if (layer.qNorm !== undefined) q = norm(b, q, layer.qNorm, eps);
    return applyRope(b, q, rope, D); // (B, T, Hq, D)
  };
  const projectKv = (b: Graph, norm: Norm, layer: LayerParams, h: Tensor, rope: { cos: Tensor; sin: Tensor }): KvCache => {
    let k = b.reshape(linear(b, params, h, layer.k), [0, 0, Hkv, D]); // (B, T, Hkv, D)
    const v = b.reshape(linear(b, params, h, layer.v), [0, 0, Hkv, D]); // (B, T, Hkv, D)
    if (layer.kNorm !== undefined) k = norm(b, k, layer.kNorm, eps);
    k = applyRope(b, k, rope, D);
    return { k: b.transpose(k, [0, 2, 1, 3]), v: b.transpose(v, [0, 2, 1, 3]) }; // (B, Hkv, T, D) each
  };
  /** The rest of a layer after attention: o_proj, residual, SwiGLU MLP, residual. */
  const finishLayer = (b: Graph, norm: Norm, layer: LayerParams, x: Tensor, ctx: Tensor): Tensor => {
    const h = b.add(x, linear(b, params, ctx, layer.o)); // (B, T, H)
    return b.add(h, mlp(b, params, layer, norm(b, h, layer.postAttentionNorm, eps))); // (B, T, H)
  };

  // ---- Prefill, one layer after another. Layer i's keys and values for every new token are
  // computed at once and kept beside its past: the two are the cache, held once for the whole
  // run (the decode loop reads them from the outer scope, never carries them). Queries go through the
  // layer C at a time (an inner Loop), so the scores of a chunk are (B, Hq, C, ≤ S + P), never
  // (B, Hq, P, S + P), and the MLP's (B, C, F) is bounded the same way.
  const keyMask = g.concat([pastMaskIn, mask], 1); // (B, S + P)
  const P = ids.shape[1] as Dim;
  // Slots of the new tokens, S … S + P − 1: the prefill's queries, and its new keys.
  const newIdx = g.range(length(g, pastMaskIn, 1), length(g, keyMask, 1), 1, 'int64', { dim: P }); // (P)
  // Positions cumsum(mask) − 1 over the whole context, at the new slots (left padding: −1, masked anyway).
  const positions = g.slice(g.sub(g.cumSum(keyMask, 1), 1), { axis: 1, start: length(g, pastMaskIn, 1), end: Infinity, dim: P }); // (B, P)
  const promptRope = ropeTables(g, params, positions); // (B, P, 1, D) each
  const C = Number.isFinite(chunk) ? chunk : undefined;
  const chunks = C === undefined ? undefined : g.div(g.add(length(g, ids, 1), C - 1), C); // (): ⌈P / C⌉

  let x = embedTokens(g, params, ids); // (B, P, H)
  // Per layer: the past as fed and the new tokens' keys and values, never concatenated inside the run
  // (a concatenation is one more copy of the whole cache); attention takes one softmax over both parts.
  const cache: { past: KvCache; fresh: KvCache }[] = [];
  const S = pastMaskIn.shape[1] as Dim;
  const pastMaskBias = g.where(g.greater(pastMaskIn, 0), g.scalar(0), MASKED_BIAS); // (B, S): 0 at real slots, masked at holes
  const pastBias = g.unsqueeze(pastMaskBias, [1, 2, 3]); // (B, 1, 1, 1, S)
  const freshReal = g.greater(mask, 0); // (B, P)
  const freshVisible = g.unsqueeze(freshReal, [1]); // (B, 1, P)
  params.layers.forEach((layer, i) => {
    const past = pastIn[i] as KvCache;
    const h = rmsNorm(g, x, layer.inputNorm, eps); // (B, P, H)
    const fresh = projectKv(g, rmsNorm, layer, h, promptRope); // (B, Hkv, P, D) each
    cache.push({ past, fresh });
    const pastKeysT = g.unsqueeze(g.transpose(past.k, [0, 1, 3, 2]), [2]); // (B, Hkv, 1, D, S): read by every chunk
    const pastValues = g.unsqueeze(past.v, [2]); // (B, Hkv, 1, S, D)
    const freshKeysT = g.unsqueeze(g.transpose(fresh.k, [0, 1, 3, 2]), [2]); // (B, Hkv, 1, D, P)
    const freshValues = g.unsqueeze(fresh.v, [2]); // (B, Hkv, 1, P, D)
    const promptInput = x;
    // Queries [start, end) of the new tokens through the whole layer.
    const chunkThroughLayer = (b: Graph, start: Tensor | undefined, end: Tensor | undefined): Tensor => {
      const Tc = b.freshDim('T'); // this chunk's query slots, the same for every slice below
      const part = (t: Tensor, axis: number): Tensor => (start === undefined || end === undefined ? t : b.slice(t, { axis, start, end, dim: Tc }));
      const xc = part(promptInput, 1); // (B, T, H)
      const q = groupQueries(b, projectQ(b, rmsNorm, layer, part(h, 1), { cos: part(promptRope.cos, 1), sin: part(promptRope.sin, 1) })); // (B, Hkv, R, T, D)
      // The chunk's new keys: every new slot up to its last query (the later ones are its future, all masked).
      const Pc = end === undefined ? P : b.freshDim('P_chunk');
      const upTo = (t: Tensor, axis: number): Tensor => (end === undefined ? t : b.slice(t, { axis, start: 0, end, dim: Pc }));
      const causal = b.not(b.greater(b.unsqueeze(upTo(newIdx, 0), [0]), b.unsqueeze(part(newIdx, 0), [1]))); // (T, P_c): key ≤ query
      const freshBias = b.unsqueeze(b.where(b.and(causal, upTo(freshVisible, 2)), b.scalar(0), MASKED_BIAS), [1, 2]); // (B, 1, 1, T, P_c)
      const pastScores = b.add(b.matMul(q, pastKeysT), pastBias); // (B, Hkv, R, T, S)
      const freshScores = b.add(b.matMul(q, upTo(freshKeysT, 4)), freshBias); // (B, Hkv, R, T, P_c)
      const probs = b.softmax(b.concat([pastScores, freshScores], -1), -1); // (B, Hkv, R, T, S + P_c)
      const split = length(b, pastScores, 4);
      const ctx = b.add(
        b.matMul(b.slice(probs, { axis: -1, start: 0, end: split, dim: S }), pastValues),
        b.matMul(b.slice(probs, { axis: -1, start: split, end: Infinity, dim: Pc }), upTo(freshValues, 3)),
      ); // (B, Hkv, R, T, D)
      return finishLayer(b, rmsNorm, layer, xc, b.reshape(b.transpose(ctx, [0, 3, 1, 2, 4]), [0, 0, Hq * D])); // (B, T, H)
    };
    if (C === undefined || chunks === undefined) {
      x = chunkThroughLayer(g, undefined, undefined);
      return;
    }
    const chunked = g.loop({
      maxTrips: chunks,
      carried: [{ init: g.slice(x, { axis: 1, start: 0, end: 0 }), shape: ['B', g.freshDim('T'), H] }],
      body: (b, { iter, carried }) => ({
        carried: [b.concat([carried[0] as Tensor, chunkThroughLayer(b, b.mul(iter, C), b.mul(b.add(iter, 1), C))], 1)],
      }),
    });
    x = g.slice(chunked.carried[0] as Tensor, { axis: 1, start: 0, end: length(g, ids, 1), dim: P }); // (B, P, H): all of it, named P again
  });

  // The first new token, from the prompt's last position (left padding puts every row's last token at the end).
  const lastHidden = rmsNorm(g, g.gather(x, g.scalar(-1, 'int64'), 1), params.finalNorm, eps); // (B, H)
  const first = sampleNextToken(g, { logits: lmHeadLogits(g, params, lastHidden), uniform: g.gather(uniforms, g.scalar(0, 'int64'), 1), temperature, topP, topK }, V);
  const firstDone = isStop(g, first.token); // (B)

  // ---- Decode: each iteration feeds the token drawn before it. The loop carries only this run's
  // decoded keys and values (B, Hkv, t, D); attention reads the past and the prompt's keys and values
  // from the outer scope and takes one softmax over the three parts' scores.
  const realTokens = g.reduceSum(keyMask, [1]); // (B): real tokens before the first new one
  const newTokens = g.squeeze(g.shape(uniforms, 1, 2), [0]); // (): N
  const Nd = g.freshDim('N');
  const Td = g.freshDim('T_decoded');
  const emptyRecent = g.slice((cache[0] as { fresh: KvCache }).fresh.k, { axis: 2, start: 0, end: 0 }); // (B, Hkv, 0, D)
  const freshBias = g.unsqueeze(g.where(freshReal, g.scalar(0), MASKED_BIAS), [1, 2]); // (B, 1, 1, P)
  const pastDecodeBias = g.unsqueeze(pastMaskBias, [1, 2]); // (B, 1, 1, S)
  const decode = g.loop({
    maxTrips: g.sub(newTokens, 1),
    cond: anyRunning(g, firstDone),
    carried: [
      first.token, // (B) the token to feed
      firstDone, // (B)
      { init: column(g, first.token), shape: ['B', Nd] },
      { init: column(g, first.logprob), shape: ['B', Nd] },
      { init: column(g, first.sampleLogprob), shape: ['B', Nd] },
      ...cache.flatMap(() => [
        { init: emptyRecent, shape: ['B', Hkv, Td, D] },
        { init: emptyRecent, shape: ['B', Hkv, Td, D] },
      ]),
    ],
    body: (b, { iter, carried }) => {
      const [token, done, tokens, logprobs, sampleLogprobs, ...recentFlat] = carried as [Tensor, Tensor, Tensor, Tensor, Tensor, ...Tensor[]];
      const rope = ropeTables(b, params, column(b, b.add(realTokens, iter))); // (B, 1, 1, D): position = real tokens before it
      let xt = embedTokens(b, params, column(b, token)); // (B, 1, H)
      const nextRecent: Tensor[] = [];
      params.layers.forEach((layer, i) => {
        const { past, fresh: prompt } = cache[i] as { past: KvCache; fresh: KvCache };
        const h = fusableRmsNorm(b, xt, layer.inputNorm, eps); // (B, 1, H)
        const fresh = projectKv(b, fusableRmsNorm, layer, h, rope); // (B, Hkv, 1, D) each
        const recent = { k: b.concat([recentFlat[2 * i] as Tensor, fresh.k], 2), v: b.concat([recentFlat[2 * i + 1] as Tensor, fresh.v], 2) }; // (B, Hkv, t + 1, D)
        nextRecent.push(recent.k, recent.v);
        const q = b.reshape(groupQueries(b, projectQ(b, fusableRmsNorm, layer, h, rope)), [0, Hkv, R, D]); // (B, Hkv, R, D): one query slot
        const pastScores = b.add(b.matMul(q, b.transpose(past.k, [0, 1, 3, 2])), pastDecodeBias); // (B, Hkv, R, S)
        const promptScores = b.add(b.matMul(q, b.transpose(prompt.k, [0, 1, 3, 2])), freshBias); // (B, Hkv, R, P)
        const recentScores = b.matMul(q, b.transpose(recent.k, [0, 1, 3, 2])); // (B, Hkv, R, t + 1): all real, all earlier
        const probs = b.softmax(b.concat([pastScores, promptScores, recentScores], -1), -1); // (B, Hkv, R, S + P + t + 1)
        const split1 = length(b, pastScores, 3);
        const split2 = b.add(split1, length(b, promptScores, 3));
        const ctx = b.add(
          b.add(
            b.matMul(b.slice(probs, { axis: -1, start: 0, end: split1, dim: pastScores.shape[3] as Dim }), past.v),
            b.matMul(b.slice(probs, { axis: -1, start: split1, end: split2, dim: promptScores.shape[3] as Dim }), prompt.v),
          ),
          b.matMul(b.slice(probs, { axis: -1, start: split2, end: Infinity, dim: recentScores.shape[3] as Dim }), recent.v),
        ); // (B, Hkv, R, D)
        xt = finishLayer(b, fusableRmsNorm, layer, xt, b.reshape(ctx, [0, 1, Hq * D])); // (B, 1, H)
      });
      const logits = lmHeadLogits(b, params, fusableRmsNorm(b, b.reshape(xt, [0, H]), params.finalNorm, eps)); // (B, V)
      const next = sampleNextToken(b, { logits, uniform: b.gather(uniforms, b.add(iter, 1), 1), temperature, topP, topK }, V);
      // Rows that already stopped emit padding with log-probability 0.
      const nextToken = b.where(done, b.scalar(config.padTokenId, 'int64'), next.token); // (B)
      const nextDone = b.or(done, isStop(b, nextToken)); // (B)
      return {
        cond: anyRunning(b, nextDone),
        carried: [
          nextToken,
          nextDone,
          b.concat([tokens, column(b, nextToken)], 1),
          b.concat([logprobs, column(b, b.where(done, b.scalar(0), next.logprob))], 1),
          b.concat([sampleLogprobs, column(b, b.where(done, b.scalar(0), next.sampleLogprob))], 1),
          ...nextRecent,
        ],
      };
    },
  });
  const [, , tokens, logprobs, sampleLogprobs, ...recentFinal] = decode.carried as [Tensor, Tensor, Tensor, Tensor, Tensor, ...Tensor[]];
  g.output(GEN_IO.tokens, tokens); // (B, N')
  g.output(GEN_IO.logprobs, logprobs); // (B, N')
  g.output(GEN_IO.sampleLogprobs, sampleLogprobs); // (B, N')
  // The slots this run added to the cache: the new tokens and the decoded tokens but the last. Never the
  // past: the caller fed it and appends these to it (Generator.runRows), so the run's outputs do not hold
  // the whole cache a second time (and the binding a third, copying them out). Without `keep_cache` the
  // key/value outputs are empty (ONNX Runtime computes every output, fetched or not).
  g.output(GEN_IO.presentMask, g.concat([mask, g.fullLike(g.slice(tokens, { axis: 1, start: 1, end: Infinity }), 1)], 1)); // (B, S')
  const kept = (t: Tensor): Tensor => g.slice(t, { axis: 2, start: 0, end: g.mul(g.cast(keepCache, 'int64'), length(g, t, 2)) });
  cache.forEach(({ fresh }, i) => {
    g.output(GEN_IO.presentKey(i), g.concat([kept(fresh.k), kept(recentFinal[2 * i] as Tensor)], 2)); // (B, Hkv, S', D)
    g.output(GEN_IO.presentValue(i), g.concat([kept(fresh.v), kept(recentFinal[2 * i + 1] as Tensor)], 2)); // (B, Hkv, S', D)
  });
  return { graph: g, params };
}
