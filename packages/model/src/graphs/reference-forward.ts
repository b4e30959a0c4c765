import type { ModelConfig } from '../io/config.ts';
import { layerPrefix, weight, type ModelWeights } from '../io/weights.ts';
import { maxOf } from '@sqlenv/shared';

/**
 * An independent, deliberately naive forward pass of the same decoder in
 * plain TypeScript (float64 arithmetic, explicit loops, no graph library),
 * written from the Hugging Face modeling code (modeling_qwen2.py,
 * modeling_qwen3.py, modeling_llama.py) to check the ONNX graphs against.
 * One sequence, no padding, positions 0..T−1. Slow by design: tiny models only.
 */
export function referenceForward(config: ModelConfig, weights: ModelWeights, tokenIds: readonly number[]): Float64Array[] {
  const T = tokenIds.length;
  const { hiddenSize: H, numHeads, numKvHeads, headDim: D, vocabSize: V } = config;
  const embed = weight(weights, 'model.embed_tokens.weight').data;

  // x[t] = embedding row of token t
  let x: Float64Array[] = tokenIds.map((id) => Float64Array.from(embed.subarray(id * H, (id + 1) * H)));

  for (let layer = 0; layer < config.numLayers; layer++) {
    const p = layerPrefix(layer);
    const w = (name: string): Float32Array => weight(weights, `${p}.${name}`).data;
    const maybe = (name: string): Float32Array | undefined => weights.get(`${p}.${name}`)?.data;

    // --- attention block ---
    const h = x.map((row) => rmsNorm(row, w('input_layernorm.weight'), config.rmsNormEps));
    const q = h.map((row) => linear(row, w('self_attn.q_proj.weight'), numHeads * D, maybe('self_attn.q_proj.bias')));
    const k = h.map((row) => linear(row, w('self_attn.k_proj.weight'), numKvHeads * D, maybe('self_attn.k_proj.bias')));
    const v = h.map((row) => linear(row, w('self_attn.v_proj.weight'), numKvHeads * D, maybe('self_attn.v_proj.bias')));
    for (let t = 0; t < T; t++) {
      for (let head = 0; head < numHeads; head++) {
        const slice = (q[t] as Float64Array).subarray(head * D, (head + 1) * D);
        if (config.qkNorm) slice.set(rmsNorm(slice, w('self_attn.q_norm.weight'), config.rmsNormEps));
        applyRope(slice, t, config.ropeTheta);
      }
      for (let head = 0; head < numKvHeads; head++) {
        const slice = (k[t] as Float64Array).subarray(head * D, (head + 1) * D);
        if (config.qkNorm) slice.set(rmsNorm(slice, w('self_attn.k_norm.weight'), config.rmsNormEps));
        applyRope(slice, t, config.ropeTheta);
      }
    }
    const groupSize = numHeads / numKvHeads; // GQA: kv head j serves query heads j·n_rep … (j+1)·n_rep − 1
    const attnOut = x.map(() => new Float64Array(numHeads * D));
    for (let head = 0; head < numHeads; head++) {
      const kvHead = Math.floor(head / groupSize);
      for (let t = 0; t < T; t++) {
        const scores = new Float64Array(t + 1);
        for (let s = 0; s <= t; s++) {
          let dot = 0;
          for (let d = 0; d < D; d++) dot += (q[t] as Float64Array)[head * D + d]! * (k[s] as Float64Array)[kvHead * D + d]!;
          scores[s] = dot / Math.sqrt(D);
        }
        const probs = softmax(scores);
        const out = attnOut[t] as Float64Array;
        for (let s = 0; s <= t; s++) {
          for (let d = 0; d < D; d++) out[head * D + d]! += probs[s]! * (v[s] as Float64Array)[kvHead * D + d]!;
        }
      }
    }
    x = x.map((row, t) => add(row, linear(attnOut[t] as Float64Array, w('self_attn.o_proj.weight'), H, maybe('self_attn.o_proj.bias'))));

    // --- MLP block (SwiGLU) ---
    const F = config.intermediateSize;
    x = x.map((row) => {
      const h2 = rmsNorm(row, w('post_attention_layernorm.weight'), config.rmsNormEps);
      const gate = linear(h2, w('mlp.gate_proj.weight'), F);
      const up = linear(h2, w('mlp.up_proj.weight'), F);
      const act = gate.map((g, i) => (g / (1 + Math.exp(-g))) * up[i]!);
      return add(row, linear(act, w('mlp.down_proj.weight'), H));
    });
  }

  const head = config.tieWordEmbeddings ? embed : weight(weights, 'lm_head.weight').data;
  return x.map((row) => linear(rmsNorm(row, weight(weights, 'model.norm.weight').data, config.rmsNormEps), head, V));
}

/** y = W·x (+ b), W stored [out, in] row-major. */
function linear(x: Float64Array, w: Float32Array, outSize: number, bias?: Float32Array): Float64Array {
  const inSize = x.length;
  const y = new Float64Array(outSize);
  for (let o = 0; o < outSize; o++) {
    let sum = bias === undefined ? 0 : bias[o]!;
    for (let i = 0; i < inSize; i++) sum += w[o * inSize + i]! * x[i]!;
    y[o] = sum;
  }
  return y;
}

/** RMSNorm: x / sqrt(mean(x²) + ε) · weight. */
function rmsNorm(x: Float64Array, w: Float32Array, eps: number): Float64Array {
  let meanSquare = 0;
  for (const value of x) meanSquare += value * value;
  meanSquare /= x.length;
  const scale = 1 / Math.sqrt(meanSquare + eps);
  return x.map((value, i) => value * scale * w[i]!);
}

/**
 * Rotate-half RoPE in place: inv_freq_i = θ^(−2i/D); for i < D/2,
 * (x_i, x_{i+D/2}) ← (x_i·cos − x_{i+D/2}·sin, x_{i+D/2}·cos + x_i·sin).
 */
function applyRope(x: Float64Array, position: number, theta: number): void {
  const half = x.length / 2;
  for (let i = 0; i < half; i++) {
    const angle = position * theta ** ((-2 * i) / x.length);
    const a = x[i]!;
    const b = x[i + half]!;
    x[i] = a * Math.cos(angle) - b * Math.sin(angle);
    x[i + half] = b * Math.cos(angle) + a * Math.sin(angle);
  }
}

function softmax(scores: Float64Array): Float64Array {
  const max = maxOf(scores);
  const exps = scores.map((s) => Math.exp(s - max));
  const sum = exps.reduce((a, b) => a + b, 0);
  return exps.map((e) => e / sum);
}

function add(a: Float64Array, b: Float64Array): Float64Array {
  return a.map((value, i) => value + b[i]!);
}
