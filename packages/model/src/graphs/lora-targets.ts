import type { ModelConfig } from '../io/config.ts';
import { layerPrefix } from '../io/tensor-names.ts';

/**
 * The projections LoRA may adapt and the frozen weight each one adapts: a leaf module, so the memory
 * estimate (imported by the weights loader) sizes adapters without importing lora.ts, which imports
 * the weights' types.
 */
export const LORA_TARGETS = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] as const;
export type LoraTarget = (typeof LORA_TARGETS)[number];

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

export function moduleOf(target: LoraTarget): 'mlp' | 'self_attn' {
  return target === 'gate_proj' || target === 'up_proj' || target === 'down_proj' ? 'mlp' : 'self_attn';
}
