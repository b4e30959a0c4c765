import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { AppError, ErrorCode } from '@sqlenv/shared';
import { parseHfConfig, type ModelConfig } from './config.ts';
import { checkModelFits } from '../memory/memory-estimate.ts';
import { checkFinite, SafetensorsCheckpoint, type F32Tensor } from './safetensors.ts';
import { layerPrefix } from './tensor-names.ts';

/**
 * The tensors a checkpoint of a config must hold, with their Hugging Face
 * names and shapes (docs/architecture.md, "Models and the runtime"). Linear weights are
 * stored [out, in] (y = x·Wᵀ).
 */
export interface TensorSpec {
  name: string;
  shape: number[];
  /** How random init fills it: normal for weights/biases, ≈1 for norm scales. */
  kind: 'weight' | 'bias' | 'norm';
}

export { layerPrefix } from './tensor-names.ts';

export function expectedTensorSpecs(config: ModelConfig): TensorSpec[] {
  const { hiddenSize: h, headDim: d, numHeads, numKvHeads, intermediateSize: f, vocabSize: v } = config;
  const specs: TensorSpec[] = [{ name: 'model.embed_tokens.weight', shape: [v, h], kind: 'weight' }];
  for (let i = 0; i < config.numLayers; i++) {
    const p = layerPrefix(i);
    specs.push(
      { name: `${p}.input_layernorm.weight`, shape: [h], kind: 'norm' },
      { name: `${p}.self_attn.q_proj.weight`, shape: [numHeads * d, h], kind: 'weight' },
      { name: `${p}.self_attn.k_proj.weight`, shape: [numKvHeads * d, h], kind: 'weight' },
      { name: `${p}.self_attn.v_proj.weight`, shape: [numKvHeads * d, h], kind: 'weight' },
    );
    if (config.qkvBias) {
      specs.push(
        { name: `${p}.self_attn.q_proj.bias`, shape: [numHeads * d], kind: 'bias' },
        { name: `${p}.self_attn.k_proj.bias`, shape: [numKvHeads * d], kind: 'bias' },
        { name: `${p}.self_attn.v_proj.bias`, shape: [numKvHeads * d], kind: 'bias' },
      );
    }
    if (config.qkNorm) {
      specs.push(
        { name: `${p}.self_attn.q_norm.weight`, shape: [d], kind: 'norm' },
        { name: `${p}.self_attn.k_norm.weight`, shape: [d], kind: 'norm' },
      );
    }
    specs.push({ name: `${p}.self_attn.o_proj.weight`, shape: [h, numHeads * d], kind: 'weight' });
    if (config.oBias) specs.push({ name: `${p}.self_attn.o_proj.bias`, shape: [h], kind: 'bias' });
    specs.push(
      { name: `${p}.post_attention_layernorm.weight`, shape: [h], kind: 'norm' },
      { name: `${p}.mlp.gate_proj.weight`, shape: [f, h], kind: 'weight' },
      { name: `${p}.mlp.up_proj.weight`, shape: [f, h], kind: 'weight' },
      { name: `${p}.mlp.down_proj.weight`, shape: [h, f], kind: 'weight' },
    );
  }
  specs.push({ name: 'model.norm.weight', shape: [h], kind: 'norm' });
  if (!config.tieWordEmbeddings) specs.push({ name: 'lm_head.weight', shape: [v, h], kind: 'weight' });
  return specs;
}

/** A model's float32 weights by Hugging Face name. */
export type ModelWeights = Map<string, F32Tensor>;

/** Fetch a weight that must exist (the graph and reference builders use this). */
export function weight(weights: ModelWeights, name: string): F32Tensor {
  const t = weights.get(name);
  if (t === undefined) throw new AppError(ErrorCode.MODEL, `missing tensor ${name}`);
  return t;
}

/** Read and validate `config.json` of a model directory. */
export function readModelConfig(dir: string): ModelConfig {
  const path = join(dir, 'config.json');
  if (!existsSync(path)) throw new AppError(ErrorCode.MODEL, `no config.json in ${dir}`);
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, 'utf8'));
  } catch (cause) {
    throw new AppError(ErrorCode.MODEL, `${path} is not valid JSON`, { cause });
  }
  return parseHfConfig(json);
}

/**
 * Load every tensor the config needs as float32, checking names and shapes;
 * tensors the architecture does not use (rotary caches, an lm_head copy of a
 * tied embedding) are ignored.
 */
export function loadModelWeights(dir: string, config: ModelConfig, options: { memoryBytes?: number } = {}): ModelWeights {
  const configPath = join(dir, 'config.json');
  checkModelFits(config, configPath, options.memoryBytes === undefined ? {} : { memoryBytes: options.memoryBytes });
  const checkpoint = SafetensorsCheckpoint.open(dir);
  checkConfigAgainstCheckpoint(config, checkpoint, configPath);
  const specs = expectedTensorSpecs(config);
  const missing = specs.filter((s) => !checkpoint.has(s.name)).map((s) => s.name);
  if (missing.length > 0) {
    const shown = missing.slice(0, 5).join(', ');
    throw new AppError(
      ErrorCode.MODEL,
      `checkpoint in ${dir} is missing ${missing.length} tensor(s) for a ${config.architecture} config: ${shown}${missing.length > 5 ? ', …' : ''}`,
      { details: { missing } },
    );
  }
  // Every shape is checked from the headers before the first tensor's data is read.
  for (const spec of specs) checkpoint.checkShape(spec.name, spec.shape);
  const weights: ModelWeights = new Map();
  for (const spec of specs) {
    const tensor = checkpoint.readF32(spec.name);
    checkFinite(tensor.data, spec.name, checkpoint.info(spec.name).file);
    weights.set(spec.name, tensor);
  }
  return weights;
}

/**
 * Compare config.json with the checkpoint's headers before any tensor is read or graph built: the
 * embedding's shape against vocab_size × hidden_size and the last layer's presence against
 * num_hidden_layers, named by the config's own fields.
 */
function checkConfigAgainstCheckpoint(config: ModelConfig, checkpoint: SafetensorsCheckpoint, configPath: string): void {
  const embed = 'model.embed_tokens.weight';
  if (checkpoint.has(embed)) {
    const shape = checkpoint.info(embed).shape;
    if (shape.length !== 2 || shape[0] !== config.vocabSize || shape[1] !== config.hiddenSize) {
      throw new AppError(ErrorCode.MODEL, `${configPath}: vocab_size ${config.vocabSize} × hidden_size ${config.hiddenSize} does not match ${embed} [${shape.join(', ')}] in ${checkpoint.info(embed).file}`);
    }
  }
  const lastLayer = `${layerPrefix(config.numLayers - 1)}.input_layernorm.weight`;
  if (!checkpoint.has(lastLayer)) {
    throw new AppError(ErrorCode.MODEL, `${configPath}: num_hidden_layers ${config.numLayers}, but the checkpoint in ${checkpoint.dir} has no ${lastLayer}`);
  }
}

/** config.json + safetensors of a directory, validated. */
export function loadModel(dir: string): { config: ModelConfig; weights: ModelWeights } {
  const config = readModelConfig(dir);
  return { config, weights: loadModelWeights(dir, config) };
}
