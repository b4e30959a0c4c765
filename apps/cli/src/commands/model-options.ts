import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { parseAgentPrompt } from '@sqlenv/agents';
import { LORA_TARGET_NAMES, RunModelSpecSchema, type RunModelSpec } from '@sqlenv/protocol';
import { AppError, ErrorCode, formatZodIssues } from '@sqlenv/shared';
import { parseLearnerConfig } from '@sqlenv/grpo/config';
import { jsonObjectOption, type FlagSpec } from '../flags.ts';

/**
 * Options of the model policy (`--policy model`) shared by `sqlenv train`, the
 * coordinator and the worker. The run-spec fields (sampling, budgets, LoRA
 * shape, prompt, initial adapter) are read by whoever writes the spec (the
 * coordinator, or `train`); every process gives its own `--model DIR`, checked
 * against the spec's fingerprint. Defaults live in RunModelSpecSchema.
 */
export const modelDirOptionSpecs: Record<string, FlagSpec> = {
  model: { key: 'modelDir', env: 'SQLENV_MODEL_DIR' },
};

export const modelSpecOptionSpecs: Record<string, FlagSpec> = {
  adapter: { key: 'adapter', env: 'SQLENV_ADAPTER_DIR' },
  prompt: { key: 'promptFile', env: 'SQLENV_PROMPT_FILE' },
  temperature: { key: 'temperature', env: 'SQLENV_TEMPERATURE' },
  'top-p': { key: 'topP', env: 'SQLENV_TOP_P' },
  'top-k': { key: 'topK', env: 'SQLENV_TOP_K' },
  'max-new-tokens': { key: 'maxNewTokens', env: 'SQLENV_MAX_NEW_TOKENS' },
  'context-tokens': { key: 'contextTokens', env: 'SQLENV_CONTEXT_TOKENS' },
  'lora-rank': { key: 'loraRank', env: 'SQLENV_LORA_RANK' },
  'lora-alpha': { key: 'loraAlpha', env: 'SQLENV_LORA_ALPHA' },
  'lora-targets': { key: 'loraTargets', env: 'SQLENV_LORA_TARGETS' },
  thinking: { key: 'thinking', env: 'SQLENV_THINKING' },
  lr: { key: 'learningRate', env: 'SQLENV_LR' },
  loss: { key: 'lossNormalisation', env: 'SQLENV_LOSS' },
  'kl-beta': { key: 'klBeta', env: 'SQLENV_KL_BETA' },
  'tis-cap': { key: 'tisCap', env: 'SQLENV_TIS_CAP' },
  'micro-batch-tokens': { key: 'microBatchTokens', env: 'SQLENV_MICRO_BATCH_TOKENS' },
  learner: { key: 'learner', env: 'SQLENV_LEARNER' },
};

const num = z.coerce.number();

export const ModelDirOptionsSchema = z.object({
  /** A model directory: config.json + safetensors (+ tokenizer.json); a Hugging Face Qwen directory works as is. */
  modelDir: z.string().min(1).optional(),
});

/** Text → typed; undefined stays undefined so RunModelSpecSchema applies its defaults. */
export const ModelSpecOptionsSchema = z.object({
  adapter: z.string().min(1).optional(),
  promptFile: z.string().min(1).optional(),
  temperature: num.nonnegative().optional(),
  topP: num.gt(0).max(1).optional(),
  topK: num.int().nonnegative().optional(),
  maxNewTokens: num.int().positive().optional(),
  contextTokens: num.int().positive().optional(),
  loraRank: num.int().positive().optional(),
  loraAlpha: num.positive().optional(),
  /** Comma-separated projection names (q_proj,v_proj,...). */
  loraTargets: z.string().optional(),
  thinking: z.union([z.boolean(), z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1')]).optional(),
  /** Learner settings (the trainer's): peak learning rate, loss normalisation, KL β, truncated-IS cap, micro-batch size. */
  learningRate: num.positive().optional(),
  lossNormalisation: z.string().optional(),
  klBeta: num.nonnegative().optional(),
  /** C of the truncated importance weight min(π_learner/π_sampler, C) (loss.importanceCap); 0 = no weight. */
  tisCap: num.nonnegative().optional(),
  microBatchTokens: num.int().positive().optional(),
  /** Any other learner setting as JSON (LearnerConfigSchema of the grpo package); the flags above win. */
  learner: z.string().optional(),
});
export type ModelSpecOptions = z.infer<typeof ModelSpecOptionsSchema>;

/**
 * The run spec's model section from command options and a model directory
 * (fingerprinted here). The prompt file's text goes into the spec, so every
 * worker plays with the same prompt.
 */
export function modelSpecFrom(options: ModelSpecOptions, fingerprint: string): RunModelSpec {
  let prompt: string | null = null;
  if (options.promptFile !== undefined) {
    try {
      prompt = readFileSync(options.promptFile, 'utf8');
    } catch (cause) {
      throw new AppError(ErrorCode.VALIDATION, `cannot read --prompt ${options.promptFile}`, { cause });
    }
    parseAgentPrompt(prompt, options.promptFile); // fail here, not in every worker
  }
  const learner = learnerSettings(options);
  const targets = options.loraTargets?.split(',').map((t) => t.trim()).filter((t) => t !== '');
  const given = {
    ...(options.loraRank === undefined ? {} : { rank: options.loraRank }),
    ...(options.loraAlpha === undefined ? {} : { alpha: options.loraAlpha }),
    ...(targets === undefined ? {} : { targets }),
  };
  const raw = {
    fingerprint,
    lora: options.adapter === undefined ? given : adapterLoraShape(options.adapter, given),
    sampling: {
      ...(options.temperature === undefined ? {} : { temperature: options.temperature }),
      ...(options.topP === undefined ? {} : { top_p: options.topP }),
      ...(options.topK === undefined ? {} : { top_k: options.topK }),
    },
    ...(options.maxNewTokens === undefined ? {} : { max_new_tokens: options.maxNewTokens }),
    ...(options.contextTokens === undefined ? {} : { context_tokens: options.contextTokens }),
    ...(options.thinking === undefined ? {} : { thinking: options.thinking }),
    prompt,
    adapter: options.adapter ?? null,
    learner,
  };
  const parsed = RunModelSpecSchema.safeParse(raw);
  if (!parsed.success) throw new AppError(ErrorCode.VALIDATION, `invalid model settings: ${formatZodIssues(parsed.error)} (LoRA targets: ${LORA_TARGET_NAMES.join(', ')})`);
  return parsed.data;
}

/**
 * The LoRA shape of an initial adapter (a PEFT directory's adapter_config.json): the run's shape
 * follows it, so `--adapter DIR` alone is enough; a --lora-* flag that contradicts it is an error
 * (the workers and the trainer would refuse the adapter later, less clearly).
 */
export function adapterLoraShape(dir: string, given: { rank?: number; alpha?: number; targets?: string[] }): { rank: number; alpha: number; targets: string[] } {
  const path = join(dir, 'adapter_config.json');
  if (!existsSync(path)) throw new AppError(ErrorCode.VALIDATION, `--adapter ${dir}: no adapter_config.json (a PEFT adapter directory holds adapter_config.json + adapter_model.safetensors)`);
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, 'utf8'));
  } catch (cause) {
    throw new AppError(ErrorCode.VALIDATION, `--adapter ${dir}: adapter_config.json is not valid JSON`, { cause });
  }
  const parsed = z.object({ r: z.number().int().positive(), lora_alpha: z.number().positive(), target_modules: z.array(z.string()) }).safeParse(json);
  if (!parsed.success) throw new AppError(ErrorCode.VALIDATION, `--adapter ${dir}: adapter_config.json lacks r, lora_alpha or a target_modules list`);
  const shape = { rank: parsed.data.r, alpha: parsed.data.lora_alpha, targets: parsed.data.target_modules };
  const sameTargets = given.targets === undefined || [...given.targets].sort().join(',') === [...shape.targets].sort().join(',');
  if ((given.rank !== undefined && given.rank !== shape.rank) || (given.alpha !== undefined && given.alpha !== shape.alpha) || !sameTargets) {
    throw new AppError(
      ErrorCode.VALIDATION,
      `--adapter ${dir} is r=${shape.rank} lora_alpha=${shape.alpha} on ${shape.targets.join(',')}; --lora-rank/--lora-alpha/--lora-targets must match it or be left out`,
    );
  }
  return shape;
}

/** The learner section of the spec: `--learner` JSON with the flags on top, validated here so a bad setting fails before the run starts. */
function learnerSettings(options: ModelSpecOptions): Record<string, unknown> {
  const base = options.learner === undefined ? {} : jsonObjectOption(options.learner, '--learner', '{"optimizer":{"warmupSteps":10}}');
  const record = (v: unknown): Record<string, unknown> => (typeof v === 'object' && v !== null ? (v as Record<string, unknown>) : {});
  const optimizer = { ...record(base['optimizer']), ...(options.learningRate === undefined ? {} : { learningRate: options.learningRate }) };
  const loss = {
    ...record(base['loss']),
    ...(options.lossNormalisation === undefined ? {} : { normalisation: options.lossNormalisation }),
    ...(options.klBeta === undefined ? {} : { klBeta: options.klBeta }),
    ...(options.tisCap === undefined ? {} : { importanceCap: options.tisCap }),
  };
  const settings = { ...base, optimizer, loss, ...(options.microBatchTokens === undefined ? {} : { microBatchTokens: options.microBatchTokens }) };
  return { ...parseLearnerConfig(settings) };
}

/**
 * The model section for a run whose policy is 'model' (undefined otherwise): the
 * model directory is fingerprinted (ONNX Runtime is not loaded for this).
 */
export async function runModelSpec(policy: string | undefined, options: ModelSpecOptions & { modelDir?: string | undefined }): Promise<RunModelSpec | undefined> {
  if (policy !== 'model') return undefined;
  if (options.modelDir === undefined) throw new AppError(ErrorCode.VALIDATION, '--policy model needs --model DIR (a model directory: config.json + safetensors, tokenizer.json for Qwen vocabularies)');
  const { modelFingerprint } = await import('@sqlenv/model');
  return modelSpecFrom(options, modelFingerprint(options.modelDir));
}
