import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { AppError, ErrorCode, formatZodIssues, writeDirAtomic } from '@sqlenv/shared';
import type { ModelConfig } from './config.ts';
import { checkLoraFits, LORA_TARGETS, loraTensorSpecs, parseLoraConfig, validateLoraWeights, type LoraConfig, type LoraWeights } from '../graphs/lora.ts';
import { checkFinite, decodeSafetensors, encodeSafetensors, numel, type StoredDtype } from './safetensors.ts';

/**
 * LoRA adapters in the layout Python's PEFT writes and reads
 * (`save_pretrained` / `PeftModel.from_pretrained`): a directory with
 * `adapter_config.json` (peft_type LORA, r, lora_alpha, target_modules, …) and
 * `adapter_model.safetensors` whose tensors are named
 * `base_model.model.model.layers.{i}.self_attn.q_proj.lora_A.weight` (A: [r, in],
 * B: [out, r]). An adapter trained here loads unchanged in transformers + PEFT
 * or vLLM, and one trained there loads here.
 *
 * The same safetensors bytes are the blob a trainer publishes for a policy
 * version: its `__metadata__` carries the LoRA settings, so a blob describes
 * itself without the JSON file.
 */
export const ADAPTER_CONFIG_FILE = 'adapter_config.json';
export const ADAPTER_WEIGHTS_FILE = 'adapter_model.safetensors';

/** A LoRA adapter: its settings and its tensors by PEFT name. */
export interface Adapter {
  lora: LoraConfig;
  weights: LoraWeights;
}

/** Metadata keys of an adapter blob (strings, as safetensors requires). */
const META = { rank: 'lora_r', alpha: 'lora_alpha', targets: 'lora_target_modules' } as const;

/**
 * The PEFT settings we can represent exactly: plain LoRA with one rank and alpha for every
 * targeted projection of every layer. Anything else (DoRA, rsLoRA scaling, per-module ranks,
 * extra trained modules, biases) is refused by name rather than silently mis-applied.
 */
const peftConfigSchema = z
  .object({
    peft_type: z.literal('LORA'),
    r: z.number().int().positive(),
    lora_alpha: z.number().positive(),
    target_modules: z.union([z.array(z.string()), z.string()]),
    bias: z.literal('none').optional(),
    use_dora: z.literal(false).optional(),
    use_rslora: z.literal(false).optional(),
    fan_in_fan_out: z.literal(false).optional(),
    modules_to_save: z.null().optional(),
    layers_to_transform: z.null().optional(),
    rank_pattern: z.record(z.string(), z.unknown()).refine((v) => Object.keys(v).length === 0, 'per-module ranks are not supported').optional(),
    alpha_pattern: z.record(z.string(), z.unknown()).refine((v) => Object.keys(v).length === 0, 'per-module alphas are not supported').optional(),
  })
  .passthrough();

/** adapter_config.json as PEFT writes it for a causal-LM LoRA. */
export function peftAdapterConfig(lora: LoraConfig, options: { baseModel?: string } = {}): Record<string, unknown> {
  return {
    alpha_pattern: {},
    auto_mapping: null,
    base_model_name_or_path: options.baseModel ?? null,
    bias: 'none',
    fan_in_fan_out: false,
    inference_mode: true,
    init_lora_weights: true,
    layers_pattern: null,
    layers_to_transform: null,
    lora_alpha: lora.alpha,
    lora_dropout: 0,
    modules_to_save: null,
    peft_type: 'LORA',
    r: lora.rank,
    rank_pattern: {},
    revision: null,
    target_modules: [...lora.targets],
    task_type: 'CAUSAL_LM',
    use_dora: false,
    use_rslora: false,
  };
}

/** LoraConfig from a parsed adapter_config.json (PEFT's keys). */
export function loraConfigFromPeft(json: unknown, label = ADAPTER_CONFIG_FILE): LoraConfig {
  const parsed = peftConfigSchema.safeParse(json);
  if (!parsed.success) throw new AppError(ErrorCode.MODEL, `${label}: not a LoRA adapter config we can apply: ${formatZodIssues(parsed.error)}`);
  const modules = parsed.data.target_modules;
  if (typeof modules === 'string') {
    throw new AppError(ErrorCode.MODEL, `${label}: target_modules is a regular expression ("${modules}"); list the module names instead (${LORA_TARGETS.join(', ')})`);
  }
  if (modules.length === 0) throw new AppError(ErrorCode.MODEL, `${label}: target_modules is empty (expected some of ${LORA_TARGETS.join(', ')})`);
  const unknown = modules.filter((m) => !(LORA_TARGETS as readonly string[]).includes(m));
  if (unknown.length > 0) throw new AppError(ErrorCode.MODEL, `${label}: target_modules ${unknown.join(', ')} are not supported (expected some of ${LORA_TARGETS.join(', ')})`);
  // Our targets are kept in LORA_TARGETS order; PEFT applies them by name, so order does not matter.
  const targets = LORA_TARGETS.filter((t) => modules.includes(t));
  try {
    return parseLoraConfig({ rank: parsed.data.r, alpha: parsed.data.lora_alpha, targets });
  } catch (error) {
    throw new AppError(ErrorCode.MODEL, `${label}: ${error instanceof Error ? error.message : String(error)} (r ${parsed.data.r}, lora_alpha ${parsed.data.lora_alpha})`, { cause: error });
  }
}

/** The adapter as safetensors bytes with PEFT tensor names (the published blob of a policy version). */
export function encodeAdapter(config: ModelConfig, adapter: Adapter, options: { dtype?: StoredDtype; metadata?: Record<string, string> } = {}): Buffer {
  validateLoraWeights(config, adapter.lora, adapter.weights);
  const tensors = loraTensorSpecs(config, adapter.lora).map((spec) => ({ name: spec.name, shape: [...spec.shape], data: adapter.weights.get(spec.name) as Float32Array }));
  return encodeSafetensors(tensors, options.dtype ?? 'F32', {
    ...options.metadata,
    [META.rank]: String(adapter.lora.rank),
    [META.alpha]: String(adapter.lora.alpha),
    [META.targets]: adapter.lora.targets.join(','),
  });
}

/**
 * Adapter tensors from safetensors bytes. The settings come from `lora` when given (a PEFT
 * directory's adapter_config.json), else from the blob's own metadata. Every tensor the
 * settings imply must be there with its shape; a tensor they do not imply is an error (it
 * would otherwise be dropped without a word).
 */
export function decodeAdapter(config: ModelConfig, bytes: Uint8Array, options: { lora?: LoraConfig; label?: string } = {}): Adapter & { metadata: Record<string, string> } {
  const label = options.label ?? 'adapter';
  const { tensors, metadata } = decodeSafetensors(bytes, label);
  const lora = options.lora ?? loraConfigFromMetadata(metadata, label);
  try {
    checkLoraFits(config, lora);
  } catch (error) {
    throw new AppError(ErrorCode.MODEL, `${label}: ${(error as Error).message}`, { cause: error });
  }
  const specs = loraTensorSpecs(config, lora);
  const expected = new Set(specs.map((s) => s.name));
  const extra = [...tensors.keys()].filter((name) => !expected.has(name));
  if (extra.length > 0) {
    throw new AppError(ErrorCode.MODEL, `${label}: ${extra.length} tensor(s) this model and LoRA config do not use, e.g. ${extra.slice(0, 3).join(', ')}`);
  }
  const weights: LoraWeights = new Map();
  for (const spec of specs) {
    const t = tensors.get(spec.name);
    if (t === undefined) throw new AppError(ErrorCode.MODEL, `${label}: missing LoRA tensor ${spec.name}`);
    if (t.shape.length !== 2 || t.shape[0] !== spec.shape[0] || t.shape[1] !== spec.shape[1] || numel(t.shape) !== t.data.length) {
      throw new AppError(ErrorCode.MODEL, `${label}: ${spec.name} has shape [${t.shape.join(', ')}], expected [${spec.shape.join(', ')}]`);
    }
    // The graph multiplies B·A by alpha / rank: a value finite alone can still overflow once scaled.
    checkFinite(t.data, spec.name, label, spec.factor === 'B' ? lora.alpha / lora.rank : 1);
    weights.set(spec.name, t.data);
  }
  return { lora, weights, metadata };
}

function loraConfigFromMetadata(metadata: Record<string, string>, label: string): LoraConfig {
  const rank = metadata[META.rank];
  const alpha = metadata[META.alpha];
  const targets = metadata[META.targets];
  if (rank === undefined || alpha === undefined || targets === undefined) {
    throw new AppError(ErrorCode.MODEL, `${label}: no LoRA settings in the safetensors metadata (${Object.values(META).join(', ')}); pass the adapter_config.json`);
  }
  return loraConfigFromPeft({ peft_type: 'LORA', r: Number(rank), lora_alpha: Number(alpha), target_modules: targets.split(',') }, label);
}

/**
 * Write `dir/adapter_config.json` + `dir/adapter_model.safetensors`, as one directory built under a
 * temporary sibling name and renamed into place: a reader never sees half an adapter, a failure
 * leaves nothing, and a non-empty `dir` is refused unless `force` (then replaced whole).
 */
export function saveAdapterDir(dir: string, config: ModelConfig, adapter: Adapter, options: { baseModel?: string; dtype?: StoredDtype; force?: boolean; label?: string } = {}): string[] {
  const weights = encodeAdapter(config, adapter, options.dtype === undefined ? {} : { dtype: options.dtype });
  const adapterConfig = `${JSON.stringify(peftAdapterConfig(adapter.lora, options), null, 2)}\n`;
  writeDirAtomic(
    dir,
    (temp) => {
      writeFileSync(join(temp, ADAPTER_WEIGHTS_FILE), weights);
      writeFileSync(join(temp, ADAPTER_CONFIG_FILE), adapterConfig);
    },
    { force: options.force ?? false, ...(options.label === undefined ? {} : { label: options.label }) },
  );
  return [ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE];
}

/** Load a PEFT adapter directory for `config` (errors name the file and what is wrong). */
export function loadAdapterDir(dir: string, config: ModelConfig): Adapter {
  const configPath = join(dir, ADAPTER_CONFIG_FILE);
  const weightsPath = join(dir, ADAPTER_WEIGHTS_FILE);
  for (const path of [configPath, weightsPath]) {
    if (!existsSync(path)) throw new AppError(ErrorCode.MODEL, `${dir} is not a PEFT adapter directory: ${path} is missing`);
  }
  const configText = readAdapterFile(configPath).toString('utf8');
  let json: unknown;
  try {
    json = JSON.parse(configText);
  } catch (cause) {
    throw new AppError(ErrorCode.MODEL, `${configPath} is not valid JSON`, { cause });
  }
  const lora = loraConfigFromPeft(json, configPath);
  const { weights } = decodeAdapter(config, readAdapterFile(weightsPath), { lora, label: weightsPath });
  return { lora, weights };
}

/** A file of an adapter directory, refused by path when it is a directory or unreadable. */
function readAdapterFile(path: string): Buffer {
  if (!statSync(path).isFile()) throw new AppError(ErrorCode.MODEL, `${path} is not a regular file (a directory?)`, { details: { path } });
  try {
    return readFileSync(path);
  } catch (cause) {
    throw new AppError(ErrorCode.MODEL, `cannot read ${path}: ${(cause as Error).message}`, { cause, details: { path } });
  }
}
