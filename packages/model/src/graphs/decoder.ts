import { checkpoint, tensor, type Dim, type Graph, type Tensor } from '@sqlenv/onnx-graph';
import { AppError, ErrorCode } from '@sqlenv/shared';
import type { ModelConfig } from '../io/config.ts';
import { loraTensorName, type LoraConfig } from './lora.ts';
import { layerPrefix, type ModelWeights } from '../io/weights.ts';

/**
 * The Qwen2 / Qwen3 / Llama decoder as ONNX graph pieces, read top to bottom
 * like the papers (RMSNorm: Zhang & Sennrich 2019; RoPE: Su et al. 2021;
 * SwiGLU: Shazeer 2020; GQA: Ainslie et al. 2023), following the Hugging Face
 * modeling files (modeling_qwen2.py, modeling_qwen3.py, modeling_llama.py).
 *
 * Shapes: B batch, T query positions, S key positions (past + T), H hidden,
 * Hq query heads, Hkv key/value heads, R = Hq / Hkv, D head dim, F SwiGLU
 * width, V vocab. Activations are float32 (float64 on request, for gradient checks).
 *
 * Base weights are initializers; LoRA factors are graph inputs (lora.ts).
 * The same functions build the teacher-forced forward (scoring / training),
 * the prefill, and the one-token decode step inside the generation Loop.
 */

/** A frozen projection y = x·Wᵀ + b, plus an optional LoRA update (α/r)·x·Aᵀ·Bᵀ. */
export interface Linear {
  weight: Tensor; // (out, in) as stored: Gemm's transB reads it without a transposed copy
  bias: Tensor | undefined; // (out)
  lora: { a: Tensor; b: Tensor; scale: number } | undefined; // A (r, in), B (out, r): inputs
}

export interface LayerParams {
  inputNorm: Tensor; // (H)
  q: Linear;
  k: Linear;
  v: Linear;
  qNorm: Tensor | undefined; // (D), Qwen3
  kNorm: Tensor | undefined; // (D), Qwen3
  o: Linear;
  postAttentionNorm: Tensor; // (H)
  gate: Linear;
  up: Linear;
  down: Linear;
}

export interface DecoderParams {
  config: ModelConfig;
  embed: Tensor; // (V, H)
  layers: LayerParams[];
  finalNorm: Tensor; // (H)
  lmHead: Tensor; // (V, H): the embedding itself when tied
  invFreq: Tensor; // (D/2) RoPE inverse frequencies
  /** The LoRA graph inputs in declaration order (name → tensor). */
  loraInputs: Map<string, Tensor>;
  /** The base weights declared as graph inputs (`trainableBase`), by checkpoint name; empty otherwise. */
  baseInputs: Map<string, Tensor>;
  /** Linear layers read their weights in place (one copy in ORT); see `linear`. */
  inPlaceWeights: boolean;
  /** Float type of weights and activations. */
  dtype: ModelFloat;
  /** What a training graph's backward pass recomputes instead of keeping (see `DecoderBuildOptions.recompute`). */
  recompute: DecoderRecompute;
}

/** Gradient checkpointing of the decoder: nothing, each layer's attention, or each whole layer. */
export type DecoderRecompute = 'none' | 'attention' | 'layer';

/** Activations and weights in float32 (every real use), or float64 (gradient checks against finite differences). */
export type ModelFloat = 'float32' | 'float64';

export interface DecoderBuildOptions {
  /** Declare LoRA A/B inputs for these settings (default: none). */
  lora?: LoraConfig;
  /**
   * Declare the base weights as graph inputs instead of initializers (default false), so a training
   * graph can differentiate them: full-parameter training of small models (pretraining or SFT from
   * scratch). Every run then feeds every weight, which only small models can afford.
   */
  trainableBase?: boolean;
  /**
   * Compute linear layers as W·xᵀ, a layout ONNX Runtime does not pre-pack (see `linear`). Default
   * false. The session option `{ sessionConfig: { 'session.disable_prepacking': '1' } }` gives the
   * same single copy with the ordinary layout and is what the big-model path uses now.
   */
  inPlaceWeights?: boolean;
  /**
   * Float type of the whole decoder (default float32). float64 copies the weights into doubles, so it is
   * for small models: the finite-difference gradient checks of the trainer need it.
   */
  dtype?: ModelFloat;
  /**
   * For graphs that `gradients()` differentiates (training): which activations the backward pass
   * recomputes from the layer's input instead of keeping from the forward pass (default 'none').
   * 'attention': each layer's attention block (its (T, S) scores and probabilities dominate at long
   * contexts); 'layer': each whole decoder layer (only the layer inputs are kept, one more forward of
   * compute). Measured in bench/results/train.md. Only for graphs without a KV cache input.
   */
  recompute?: DecoderRecompute;
}

/** Per-layer key/value cache. */
export interface KvCache {
  k: Tensor; // (B, Hkv, S, D)
  v: Tensor; // (B, Hkv, S, D)
}

// ---------------------------------------------------------------------------------------------
// Parameters

/**
 * Declare every weight of `config` in the root graph `g`: base weights as
 * float32 initializers in their stored layout, LoRA A/B as inputs when
 * `lora` is given.
 */
export function declareDecoderParams(g: Graph, config: ModelConfig, weights: ModelWeights, options: DecoderBuildOptions = {}): DecoderParams {
  const lora = options.lora;
  const dtype = options.dtype ?? 'float32';
  // The graph references the caller's Float32Arrays (no copies): a 0.6B model is 2.4 GB in float32.
  const baseInputs = new Map<string, Tensor>();
  const init = (name: string): Tensor => {
    const w = weights.get(name);
    if (w === undefined) throw new AppError(ErrorCode.MODEL, `missing tensor ${name}`);
    if (options.trainableBase === true) {
      const input = g.input(name, dtype, w.shape);
      baseInputs.set(name, input);
      return input;
    }
    return g.initializer(name, dtype === 'float32' ? tensor('float32', w.shape, w.data) : tensor('float64', w.shape, Float64Array.from(w.data)));
  };
  const maybe = (name: string): Tensor | undefined => (weights.has(name) ? init(name) : undefined);
  const loraInputs = new Map<string, Tensor>();

  const linear = (layer: number, module: 'self_attn' | 'mlp', target: LoraConfig['targets'][number], outSize: number, inSize: number): Linear => {
    const prefix = `${layerPrefix(layer)}.${module}.${target}`;
    let adapter: Linear['lora'];
    if (lora !== undefined && lora.targets.includes(target)) {
      const aName = loraTensorName(layer, target, 'A');
      const bName = loraTensorName(layer, target, 'B');
      const a = g.input(aName, dtype, [lora.rank, inSize]);
      const b = g.input(bName, dtype, [outSize, lora.rank]);
      loraInputs.set(aName, a).set(bName, b);
      adapter = { a, b, scale: lora.alpha / lora.rank };
    }
    return { weight: init(`${prefix}.weight`), bias: maybe(`${prefix}.bias`), lora: adapter };
  };

  const { hiddenSize: H, headDim: D, numHeads: Hq, numKvHeads: Hkv, intermediateSize: F } = config;
  const embed = init('model.embed_tokens.weight');
  const layers: LayerParams[] = [];
  for (let i = 0; i < config.numLayers; i++) {
    const p = layerPrefix(i);
    layers.push({
      inputNorm: init(`${p}.input_layernorm.weight`),
      q: linear(i, 'self_attn', 'q_proj', Hq * D, H),
      k: linear(i, 'self_attn', 'k_proj', Hkv * D, H),
      v: linear(i, 'self_attn', 'v_proj', Hkv * D, H),
      qNorm: config.qkNorm ? init(`${p}.self_attn.q_norm.weight`) : undefined,
      kNorm: config.qkNorm ? init(`${p}.self_attn.k_norm.weight`) : undefined,
      o: linear(i, 'self_attn', 'o_proj', H, Hq * D),
      postAttentionNorm: init(`${p}.post_attention_layernorm.weight`),
      gate: linear(i, 'mlp', 'gate_proj', F, H),
      up: linear(i, 'mlp', 'up_proj', F, H),
      down: linear(i, 'mlp', 'down_proj', H, F),
    });
  }
  const finalNorm = init('model.norm.weight');
  const lmHead = config.tieWordEmbeddings ? embed : init('lm_head.weight');
  // inv_freq_i = θ^(−2i/D), computed in float32 like transformers' default RoPE init.
  const invFreq = Float32Array.from({ length: D / 2 }, (_, i) => 1 / config.ropeTheta ** ((2 * i) / D));
  return {
    config,
    embed,
    layers,
    finalNorm,
    lmHead,
    invFreq: g.constant(dtype === 'float32' ? tensor('float32', [D / 2], invFreq) : tensor('float64', [D / 2], Float64Array.from(invFreq))),
    loraInputs,
    baseInputs,
    inPlaceWeights: options.inPlaceWeights ?? false,
    dtype,
    recompute: options.recompute ?? 'none',
  };
}

// ---------------------------------------------------------------------------------------------
// Building blocks

/** RMSNorm over the last axis: x / sqrt(mean(x²) + ε) · w. */
export function rmsNorm(g: Graph, x: Tensor, w: Tensor, eps: number): Tensor {
  const meanSquare = g.reduceMean(g.mul(x, x), [-1], { keepDims: true }); // (..., 1)
  const inv = g.reciprocal(g.sqrt(g.add(meanSquare, eps))); // (..., 1)
  return g.mul(g.mul(x, inv), w); // (..., H)
}

/**
 * The same RMSNorm as Pow → ReduceMean → Add → Sqrt → Div → Mul, the pattern ONNX Runtime's graph
 * optimizer fuses into one SimplifiedLayerNormalization node (x·x with a Reciprocal is not matched
 * and stays six nodes). The fusion also needs the input's rank, which ONNX Runtime's shape inference
 * knows inside the decode loop (where this is used) but loses through Loop outputs and slices of
 * outer-scope values. For inference graphs: the decode step of a 4-layer Qwen3 has 17 norms, 102
 * nodes fewer of ~570 (docs/inference.md, "Fewer nodes per step"). Differentiated graphs keep
 * `rmsNorm`, whose gradient is exact to float64 (the fused kernel is not part of their checks).
 */
export function fusableRmsNorm(g: Graph, x: Tensor, w: Tensor, eps: number): Tensor {
  const meanSquare = g.reduceMean(g.pow(x, 2), [-1], { keepDims: true }); // (..., 1)
  return g.mul(g.div(x, g.sqrt(g.add(meanSquare, eps))), w); // (..., H)
}

/**
 * x (..., in) → (..., out), flattened to 2-D.
 *
 * Default: y = x·Wᵀ + b as Gemm(transB) with the bias as C. ONNX Runtime
 * pre-packs that constant B input and keeps the original too, so the model
 * sits in memory twice (Qwen3-0.6B: 7.4 GB peak). Two ways to one copy
 * (about 5.6 GB peak; pre-packing only speeds up larger GEMMs: bench/results/generate.md):
 * the session entry `session.disable_prepacking` (same graph, preferred), or
 * `inPlaceWeights`: yᵀ = W·xᵀ as MatMul with W as the A input, read where it lies.
 */
export function linear(g: Graph, params: DecoderParams, x: Tensor, p: Linear): Tensor {
  const lead = x.shape.slice(0, -1);
  const inSize = x.shape[x.rank - 1] as number;
  const outSize = p.weight.shape[0] as number;
  const x2d = g.reshape(x, [-1, inSize]); // (N, in)
  let y: Tensor;
  if (params.inPlaceWeights) {
    const yT = g.matMul(p.weight, g.transpose(x2d, [1, 0])); // (out, N)
    y = g.transpose(p.bias === undefined ? yT : g.add(yT, g.unsqueeze(p.bias, [1])), [1, 0]); // (N, out)
  } else {
    y = g.gemm(x2d, p.weight, p.bias ?? null, { transB: true }); // (N, out)
  }
  if (p.lora !== undefined) {
    const down = g.gemm(x2d, p.lora.a, null, { transB: true }); // (N, r)
    y = g.gemm(down, p.lora.b, y, { transB: true, alpha: p.lora.scale }); // (N, out): y + (α/r)·x·Aᵀ·Bᵀ
  }
  return g.reshape(y, [...lead, outSize]); // (..., out)
}

/** cos/sin tables for positions: each (B, T, 1, D), broadcast over heads. */
export function ropeTables(g: Graph, params: DecoderParams, positions: Tensor): { cos: Tensor; sin: Tensor } {
  const pos = g.unsqueeze(g.cast(positions, params.dtype), [2]); // (B, T, 1)
  const freqs = g.mul(pos, params.invFreq); // (B, T, D/2)
  const emb = g.unsqueeze(g.concat([freqs, freqs], -1), [2]); // (B, T, 1, D)
  return { cos: g.cos(emb), sin: g.sin(emb) };
}

/** Rotate-half RoPE: x·cos + rotate_half(x)·sin, rotate_half(x) = concat(−x[D/2:], x[:D/2]). */
export function applyRope(g: Graph, x: Tensor, rope: { cos: Tensor; sin: Tensor }, headDim: number): Tensor {
  const half = headDim / 2;
  const x1 = g.slice(x, { axis: -1, start: 0, end: half }); // (B, T, h, D/2)
  const x2 = g.slice(x, { axis: -1, start: half, end: headDim }); // (B, T, h, D/2)
  const rotated = g.concat([g.neg(x2), x1], -1); // (B, T, h, D)
  return g.add(g.mul(x, rope.cos), g.mul(rotated, rope.sin)); // (B, T, h, D)
}

/**
 * Grouped-query causal self-attention. `bias` is additive, (B, 1, 1, T, S):
 * 0 where a query may attend to a key, a large negative number elsewhere
 * (padding and the future). Returns the output and the updated cache.
 */
function attention(g: Graph, params: DecoderParams, layer: LayerParams, x: Tensor, rope: { cos: Tensor; sin: Tensor }, bias: Tensor, past: KvCache | undefined): { out: Tensor; present: KvCache } {
  const { headDim: D, numHeads: Hq, numKvHeads: Hkv, rmsNormEps: eps } = params.config;
  const R = Hq / Hkv;
  let q = g.reshape(linear(g, params, x, layer.q), [0, 0, Hq, D]); // (B, T, Hq, D)
  let k = g.reshape(linear(g, params, x, layer.k), [0, 0, Hkv, D]); // (B, T, Hkv, D)
  const v = g.reshape(linear(g, params, x, layer.v), [0, 0, Hkv, D]); // (B, T, Hkv, D)
  if (layer.qNorm !== undefined && layer.kNorm !== undefined) {
    q = rmsNorm(g, q, layer.qNorm, eps); // (B, T, Hq, D)  Qwen3: per-head norm before RoPE
    k = rmsNorm(g, k, layer.kNorm, eps); // (B, T, Hkv, D)
  }
  q = applyRope(g, q, rope, D); // (B, T, Hq, D)
  k = applyRope(g, k, rope, D); // (B, T, Hkv, D)

  let kHeads = g.transpose(k, [0, 2, 1, 3]); // (B, Hkv, T, D)
  let vHeads = g.transpose(v, [0, 2, 1, 3]); // (B, Hkv, T, D)
  if (past !== undefined) {
    kHeads = g.concat([past.k, kHeads], 2); // (B, Hkv, S, D)
    vHeads = g.concat([past.v, vHeads], 2); // (B, Hkv, S, D)
  }
  // GQA without materialising repeated kv heads: query head h = j·R + r uses kv head j
  // (transformers' repeat_kv repeats each kv head R times contiguously), so split Hq into
  // (Hkv, R) and let MatMul broadcast the kv tensors over R.
  const qGroups = g.transpose(g.reshape(g.mul(q, 1 / Math.sqrt(D)), [0, 0, Hkv, R, D]), [0, 2, 3, 1, 4]); // (B, Hkv, R, T, D)
  const kT = g.unsqueeze(g.transpose(kHeads, [0, 1, 3, 2]), [2]); // (B, Hkv, 1, D, S)
  const scores = g.add(g.matMul(qGroups, kT), bias); // (B, Hkv, R, T, S)
  const probs = g.softmax(scores, -1); // (B, Hkv, R, T, S)
  const ctx = g.matMul(probs, g.unsqueeze(vHeads, [2])); // (B, Hkv, R, T, D)
  const merged = g.reshape(g.transpose(ctx, [0, 3, 1, 2, 4]), [0, 0, Hq * D]); // (B, T, Hq·D)
  return { out: linear(g, params, merged, layer.o), present: { k: kHeads, v: vHeads } }; // (B, T, H)
}

/** SwiGLU MLP: down(silu(gate(x)) · up(x)). */
export function mlp(g: Graph, params: DecoderParams, layer: LayerParams, x: Tensor): Tensor {
  const gate = linear(g, params, x, layer.gate); // (B, T, F)
  // ONNX Runtime fuses x·sigmoid(x) into QuickGelu when the sigmoid has no other consumer (a forward
  // pass, or the forward copy of a checkpointed layer), and QuickGelu has no float64 CPU kernel: in
  // float64 write the same function as x / (1 + e^−x).
  const silu = params.dtype === 'float64' ? g.div(gate, g.add(g.exp(g.neg(gate)), 1)) : g.mul(gate, g.sigmoid(gate)); // (B, T, F)
  return linear(g, params, g.mul(silu, linear(g, params, x, layer.up)), layer.down); // (B, T, H)
}

// ---------------------------------------------------------------------------------------------
// The decoder

/** Token embeddings: (B, T) ids → (B, T, H). */
export function embedTokens(g: Graph, params: DecoderParams, ids: Tensor): Tensor {
  return g.gather(params.embed, ids, 0); // (B, T, H)
}

/**
 * All decoder layers and the final norm. `positions` (B, T) are RoPE
 * positions (cumsum(mask) − 1 under left padding); `past` the per-layer
 * cache of earlier positions, if any. Returns the normed hidden states and the
 * per-layer caches including this call's positions.
 */
export function decoderForward(
  g: Graph,
  params: DecoderParams,
  x: Tensor,
  positions: Tensor,
  bias: Tensor,
  past?: readonly KvCache[],
): { hidden: Tensor; present: KvCache[] } {
  const { rmsNormEps: eps } = params.config;
  const rope = ropeTables(g, params, positions); // (B, T, 1, D) each
  const present: KvCache[] = [];
  if (params.recompute !== 'none' && past !== undefined) throw new AppError(ErrorCode.MODEL, 'decoderForward: recompute is for graphs without a KV cache');
  params.layers.forEach((layer, i) => {
    // Checkpointed regions (autodiff's `checkpoint`) must be used only through their result: `present`
    // reads tensors inside them, which is fine because no training graph consumes it.
    const block = (input: Tensor): Tensor => {
      let kv: KvCache | undefined;
      const attnOut = (): Tensor => {
        const attn = attention(g, params, layer, rmsNorm(g, input, layer.inputNorm, eps), rope, bias, past?.[i]);
        kv = attn.present;
        return attn.out;
      };
      const h = g.add(input, params.recompute === 'attention' ? checkpoint(g, attnOut) : attnOut()); // (B, T, H)
      present.push(kv as KvCache);
      return g.add(h, mlp(g, params, layer, rmsNorm(g, h, layer.postAttentionNorm, eps))); // (B, T, H)
    };
    const input = x;
    x = params.recompute === 'layer' ? checkpoint(g, () => block(input)) : block(input);
  });
  return { hidden: rmsNorm(g, x, params.finalNorm, eps), present }; // (B, T, H)
}

/** Vocabulary logits for 2-D hidden states: (N, H) → (N, V), Gemm with transB so the tied embedding is not copied. */
export function lmHeadLogits(g: Graph, params: DecoderParams, hidden2d: Tensor): Tensor {
  return g.gemm(hidden2d, params.lmHead, null, { transB: true }); // (N, V)
}

/** A large negative bias instead of −∞, so fully masked rows (left padding) stay finite. */
export const MASKED_BIAS = -1e9;

/**
 * Attention bias and RoPE positions for `T` new slots after `S_past` cached
 * ones, over a left-padded batch. `pastMask` (B, S_past) and `mask` (B, T)
 * mark real tokens (1) and padding (0); without a past this is the plain
 * teacher-forced / prefill case. Query slot i (absolute S_past + i) sees key
 * slot j iff j ≤ S_past + i and the key is a real token. Positions are
 * cumsum(full mask) − 1 at the query slots (padding gets −1: it is masked anyway).
 */
export function attentionBiasAndPositions(g: Graph, mask: Tensor, pastMask?: Tensor, dtype: ModelFloat = 'float32'): { bias: Tensor; positions: Tensor } {
  const full = pastMask === undefined ? mask : g.concat([pastMask, mask], 1); // (B, S)
  const [S, T] = [full.shape[1] as Dim, mask.shape[1] as Dim];
  const length = (x: Tensor): Tensor => g.squeeze(g.shape(x, 1, 2), [0]); // () int64
  const pastLength = pastMask === undefined ? g.scalar(0, 'int64') : length(pastMask); // (): S_past
  // Slot indices; the declared dims make them line up with the masks' (B, S) and (B, T).
  const keyIdx = g.range(0, length(full), 1, 'int64', { dim: S }); // (S): 0 … S−1
  const queryIdx = g.range(pastLength, length(full), 1, 'int64', { dim: T }); // (T): S_past … S−1
  const causal = g.not(g.greater(g.unsqueeze(keyIdx, [0]), g.unsqueeze(queryIdx, [1]))); // (T, S): key ≤ query
  const visible = g.and(causal, g.unsqueeze(g.greater(full, 0), [1])); // (B, T, S)
  const bias = g.unsqueeze(g.where(visible, g.scalar(0, dtype), MASKED_BIAS), [1, 2]); // (B, 1, 1, T, S)
  const allPositions = g.sub(g.cumSum(full, 1), 1); // (B, S)
  const positions = pastMask === undefined ? allPositions : g.slice(allPositions, { axis: 1, start: pastLength, end: Infinity, dim: T }); // (B, T)
  return { bias, positions };
}
