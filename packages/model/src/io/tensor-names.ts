/**
 * Hugging Face tensor names shared by the weights loader, the decoder and the LoRA adapter: a leaf
 * module, so that none of them imports another only for a name.
 */

/** The prefix of decoder layer `layer`'s tensors (`model.layers.3.self_attn.q_proj.weight`). */
export const layerPrefix = (layer: number): string => `model.layers.${layer}`;
