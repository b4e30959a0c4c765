import { z } from 'zod';
import { AppError, ErrorCode, formatZodIssues, Xoshiro128 } from '@sqlenv/shared';
import type { ModelConfig } from '../io/config.ts';
import { layerPrefix } from '../io/tensor-names.ts';
import type { ModelWeights } from '../io/weights.ts';

/**
 * LoRA (Hu et al. 2021, https://arxiv.org/abs/2106.09685): a frozen linear
 * W [out, in] becomes y = x·Wᵀ + (α/r)·(x·Aᵀ)·Bᵀ with A [r, in], B [out, r].
 * A and B are graph INPUTS (not initializers), so a new policy version is a
 * new set of input tensors for the same session; B = 0 (or every tensor 0)
 * gives exactly the base model, the reference policy.
 *
 * Tensor names follow PEFT's saved adapters
 * (`base_model.model.model.layers.{i}.self_attn.q_proj.lora_A.weight`), so
 * an adapter can be exported to / imported from PEFT's safetensors format.
 */
export const LORA_TARGETS = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] as const;
export type LoraTarget = (typeof LORA_TARGETS)[number];

/**
 * The largest LoRA scale alpha / rank accepted. Usual values are 0.5 to 4 (PEFT's examples: alpha
 * = 2r); past this the update overwhelms the frozen weight, and near float32's range (alpha 1e308)
 * every activation it touches becomes Inf.
 */
export const MAX_LORA_SCALE = 1024;

export const loraConfigSchema = z
  .object({
    /** Adapter rank r; at most the smaller dimension of every targeted projection (checked against the model by checkLoraFits). */
    rank: z.number().int().positive().default(8),
    /** Scale numerator: the update is multiplied by alpha / rank (at most MAX_LORA_SCALE). */
    alpha: z.number().positive().default(16),
    /** Which projections carry an adapter (every layer gets the same set). */
    targets: z.array(z.enum(LORA_TARGETS)).nonempty().default([...LORA_TARGETS]),
  })
  .refine((c) => c.alpha / c.rank <= MAX_LORA_SCALE, {
    path: ['alpha'],
    message: `the LoRA scale alpha / rank must be at most ${MAX_LORA_SCALE} (usual values are 0.5 to 4)`,
  });
export type LoraConfig = z.infer<typeof loraConfigSchema>;
export type LoraConfigInput = z.input<typeof loraConfigSchema>;

export function parseLoraConfig(input: unknown = {}): LoraConfig {
  const result = loraConfigSchema.safeParse(input);
  if (!result.success) throw new AppError(ErrorCode.MODEL, `invalid LoRA config: ${formatZodIssues(result.error)}`);
  return result.data;
}

export interface LoraTensorSpec {
  /** PEFT name of the tensor (also the graph input name). */
  name: string;
  layer: number;
  target: LoraTarget;
  /** 'A' [rank, in] or 'B' [out, rank]. */
  factor: 'A' | 'B';
  shape: [number, number];
}

/** The frozen weight a target adapts, and its [out, in]. */
export function targetWeight(config: ModelConfig, layer: number, target: LoraTarget): { name: string; outSize: number; inSize: number } {
  const { hiddenSize: h, headDim: d, numHeads, numKvHeads, intermediateSize: f } = config;
  const dims: Record<LoraTarget, [number, number]> = {
    q_proj: [numHeads * d, h],
    k_proj: [numKvHeads * d, h],
    v_proj: [numKvHeads * d, h],
    o_proj: [h, numHeads * d],
    gate_proj: [f, h],
    up_proj: [f, h],
    down_proj: [h, f],
  };
  const [outSize, inSize] = dims[target];
  return { name: `${layerPrefix(layer)}.${moduleOf(target)}.${target}.weight`, outSize, inSize };
}

function moduleOf(target: LoraTarget): 'mlp' | 'self_attn' {
  return target === 'gate_proj' || target === 'up_proj' || target === 'down_proj' ? 'mlp' : 'self_attn';
}

export function loraTensorName(layer: number, target: LoraTarget, factor: 'A' | 'B'): string {
  return `base_model.model.${layerPrefix(layer)}.${moduleOf(target)}.${target}.lora_${factor}.weight`;
}

/** Refuse an adapter whose shape (rank, alpha, targets) is not `expected` (`whose` names it in the message: "the run's", "the server's"). */
export function checkSameLora(found: LoraConfig, expected: LoraConfig, label: string, whose: string): void {
  const same = found.rank === expected.rank && found.alpha === expected.alpha && found.targets.length === expected.targets.length && found.targets.every((t) => expected.targets.includes(t));
  if (!same) {
    throw new AppError(ErrorCode.MODEL, `${label}: LoRA r=${found.rank} alpha=${found.alpha} on ${found.targets.join(',')} is not ${whose} r=${expected.rank} alpha=${expected.alpha} on ${expected.targets.join(',')}`);
  }
}

/**
 * Refuse a rank above the smaller dimension of a targeted projection: B·A then has more parameters
 * than the update it can express (rank ≤ min(in, out)), and an unbounded rank (1,000,000) would
 * allocate gigabytes before anything else failed.
 */
export function checkLoraFits(config: ModelConfig, lora: Pick<LoraConfig, 'rank' | 'targets'>): void {
  for (const target of lora.targets) {
    const { outSize, inSize } = targetWeight(config, 0, target);
    if (lora.rank > Math.min(outSize, inSize)) {
      throw new AppError(
        ErrorCode.MODEL,
        `LoRA rank ${lora.rank} exceeds min(out, in) = ${Math.min(outSize, inSize)} of ${target} [${outSize}, ${inSize}]: a rank above the smaller dimension adds parameters but no capacity`,
        { details: { rank: lora.rank, target, outSize, inSize } },
      );
    }
  }
}

/** Every adapter tensor, in a fixed order (layer, target, A then B). */
export function loraTensorSpecs(config: ModelConfig, lora: LoraConfig): LoraTensorSpec[] {
  checkLoraFits(config, lora);
  const specs: LoraTensorSpec[] = [];
  for (let layer = 0; layer < config.numLayers; layer++) {
    for (const target of LORA_TARGETS) {
      if (!lora.targets.includes(target)) continue;
      const { outSize, inSize } = targetWeight(config, layer, target);
      specs.push({ name: loraTensorName(layer, target, 'A'), layer, target, factor: 'A', shape: [lora.rank, inSize] });
      specs.push({ name: loraTensorName(layer, target, 'B'), layer, target, factor: 'B', shape: [outSize, lora.rank] });
    }
  }
  return specs;
}

/** Adapter values by PEFT name. */
export type LoraWeights = Map<string, Float32Array>;

/** All zeros: the base (reference) policy. */
export function zeroLoraWeights(config: ModelConfig, lora: LoraConfig): LoraWeights {
  return new Map(loraTensorSpecs(config, lora).map((s) => [s.name, new Float32Array(s.shape[0] * s.shape[1])]));
}

/**
 * PEFT's default init: A ~ Kaiming-uniform(a=√5) = U(−1/√in, 1/√in), B = 0,
 * so training starts at the base policy with a non-zero gradient for B.
 * `bStd` > 0 makes B random too (tests need an adapter that changes the output).
 */
export function initLoraWeights(config: ModelConfig, lora: LoraConfig, options: { seed?: number; bStd?: number } = {}): LoraWeights {
  const rng = new Xoshiro128(options.seed ?? 0);
  const weights: LoraWeights = new Map();
  for (const spec of loraTensorSpecs(config, lora)) {
    const [rows, cols] = spec.shape;
    const values = new Float32Array(rows * cols);
    if (spec.factor === 'A') {
      const bound = 1 / Math.sqrt(cols);
      for (let i = 0; i < values.length; i++) values[i] = (2 * rng.uniform() - 1) * bound;
    } else if ((options.bStd ?? 0) > 0) {
      values.set(rng.normalArray(values.length, options.bStd ?? 0));
    }
    weights.set(spec.name, values);
  }
  return weights;
}

/** Check an adapter against the layout: every tensor present with the right size. */
export function validateLoraWeights(config: ModelConfig, lora: LoraConfig, weights: LoraWeights): void {
  for (const spec of loraTensorSpecs(config, lora)) {
    const values = weights.get(spec.name);
    if (values === undefined) throw new AppError(ErrorCode.MODEL, `missing LoRA tensor ${spec.name}`);
    if (values.length !== spec.shape[0] * spec.shape[1]) {
      throw new AppError(ErrorCode.MODEL, `LoRA tensor ${spec.name} has ${values.length} values, expected [${spec.shape.join(', ')}]`);
    }
  }
}

/**
 * Base weights with the adapters folded in, W' = W + (α/r)·B·A: what a
 * LoRA forward must equal (used to test the graph against the reference).
 */
export function mergeLora(config: ModelConfig, base: ModelWeights, lora: LoraConfig, adapter: LoraWeights): ModelWeights {
  validateLoraWeights(config, lora, adapter);
  const merged: ModelWeights = new Map(base);
  const scale = lora.alpha / lora.rank;
  for (let layer = 0; layer < config.numLayers; layer++) {
    for (const target of lora.targets) {
      const { name, outSize, inSize } = targetWeight(config, layer, target);
      const w = base.get(name);
      if (w === undefined) throw new AppError(ErrorCode.MODEL, `missing tensor ${name}`);
      const a = adapter.get(loraTensorName(layer, target, 'A')) as Float32Array;
      const b = adapter.get(loraTensorName(layer, target, 'B')) as Float32Array;
      const out = Float32Array.from(w.data);
      for (let o = 0; o < outSize; o++) {
        for (let i = 0; i < inSize; i++) {
          let sum = 0;
          for (let r = 0; r < lora.rank; r++) sum += (b[o * lora.rank + r] as number) * (a[r * inSize + i] as number);
          out[o * inSize + i] = (out[o * inSize + i] as number) + scale * sum;
        }
      }
      merged.set(name, { shape: w.shape, data: out });
    }
  }
  return merged;
}
