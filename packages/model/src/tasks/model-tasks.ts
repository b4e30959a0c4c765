import { copyFileSync, existsSync, readFileSync, statfsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { SessionConfig } from '@sqlenv/onnx-graph';
import { AppError, checkDirOutput, checkOutputNotInput, ErrorCode, writeDirAtomic } from '@sqlenv/shared';
import { parseHfConfig, parseModelConfig, type ModelConfig } from '../io/config.ts';
import { Generator } from '../runtime/generator.ts';
import { bundledQwenTokenizerPaths, loadHfTokenizer } from '../tokenizer/hf-tokenizer.ts';
import { isPresetName, presetConfig } from '../io/presets.ts';
import { writeRandomCheckpoint } from '../io/random-checkpoint.ts';
import type { StoredDtype } from '../io/safetensors.ts';
import { LogitsModel } from '../runtime/scorer.ts';
import { loadModel } from '../io/weights.ts';
import { loadAdapterDir, type Adapter } from '../io/peft-adapter.ts';
import { loadChatFormat, QWEN_TOKENIZER_VOCAB } from '../io/model-dir.ts';
import { countParameters, formatBytes, largestTensor, MAX_TENSOR_ELEMENTS, memoryBoundBytes } from '../memory/memory-estimate.ts';

/**
 * The `sqlenv model …` subcommands as functions (the CLI app parses flags
 * and prints what these return; nothing here exits the process).
 *
 *   model init --config <preset|json|file.json> --out DIR [--seed N] [--dtype F32|F16|BF16]
 *                                                [--init-std X] [--max-shard-bytes N] [--force]
 *       Write a random-initialised checkpoint (config.json + safetensors). `--config` is a
 *       preset name (tiny-qwen2, tiny-qwen3, tiny-llama, qwen3-0.6b, qwen2.5-0.5b,
 *       smollm2-135m), inline JSON or a JSON file, in our ModelConfig shape or a Hugging Face
 *       config.json. Qwen-vocabulary models also get the bundled Qwen tokenizer files. A non-empty
 *       --out is refused unless --force (then replaced whole); the directory appears only complete.
 *   model logits --model DIR --tokens 1,2,3 [--adapter DIR] [--json]
 *       Final-position logits of the token sequence. Needs only config.json + safetensors.
 *       `--adapter DIR`: a PEFT LoRA directory (adapter_config.json + adapter_model.safetensors)
 *       applied on top (also for generate).
 *       With --json: one JSON array of vocabSize numbers; without: the top 10 as text.
 *   model generate --model DIR --prompt "..." [--adapter DIR] [--max-new-tokens 64] [--temperature 0.7]
 *                  [--top-p 1] [--top-k 0] [--seed 0] [--raw]
 *       Continue a prompt. The prompt is wrapped in the chat template (user turn +
 *       generation prompt) unless --raw. Tokenizer: DIR/tokenizer.json, else the byte
 *       tokenizer (vocab 272), else the bundled Qwen tokenizer for Qwen-vocabulary models.
 */

export interface ModelInitArgs {
  config: string;
  out: string;
  seed?: number;
  dtype?: StoredDtype;
  initStd?: number;
  maxShardBytes?: number;
  /** A directory whose tokenizer.json (+ tokenizer_config.json) is copied in; its vocabulary must fit the config's. */
  tokenizer?: string;
  /** Replace a non-empty --out directory (whole: no file of the old model survives). Default false. */
  force?: boolean;
}

export interface ModelInitResult {
  dir: string;
  files: string[];
  config: ModelConfig;
  /** One line for the terminal. */
  summary: string;
}

/** `model init`: write a random checkpoint. */
export async function modelInit(args: ModelInitArgs): Promise<ModelInitResult> {
  const config = resolveConfigArg(args.config);
  // Everything that can refuse does so before a byte is written.
  checkDirOutput(args.out, { force: args.force ?? false, label: '--out' });
  checkOutputNotInput({ label: '--out', path: args.out }, [{ label: '--tokenizer', path: args.tokenizer }]);
  checkCheckpointFits(config, args.out, args.dtype ?? 'F32');
  if (args.tokenizer !== undefined) {
    const tokenizer = await loadHfTokenizer(args.tokenizer);
    if (tokenizer.vocabSize > config.vocabSize) {
      throw new AppError(ErrorCode.VALIDATION, `--tokenizer: ${tokenizer.vocabSize} tokens do not fit the config's vocab_size ${config.vocabSize}`);
    }
    for (const [token, ids] of [['<|im_end|>', config.eosTokenIds], ['<|endoftext|>', [config.padTokenId]]] as const) {
      const id = tokenizer.tokenId(token);
      if (id === undefined || !ids.includes(id)) throw new AppError(ErrorCode.VALIDATION, `--tokenizer: ${token} is id ${id ?? 'missing'}, but the config says ${ids.join(', ')}`);
    }
  }
  // Built under a temporary sibling and renamed: a failure (disk full, a kill) leaves no half-written model.
  const files = writeDirAtomic(
    args.out,
    (dir) => {
      const written = writeRandomCheckpoint(dir, config, {
        ...(args.seed === undefined ? {} : { seed: args.seed }),
        ...(args.dtype === undefined ? {} : { dtype: args.dtype }),
        ...(args.initStd === undefined ? {} : { initStd: args.initStd }),
        ...(args.maxShardBytes === undefined ? {} : { maxShardSizeBytes: args.maxShardBytes }),
      });
      if (args.tokenizer !== undefined) {
        copyFileSync(join(args.tokenizer, 'tokenizer.json'), join(dir, 'tokenizer.json'));
        written.push('tokenizer.json');
        if (existsSync(join(args.tokenizer, 'tokenizer_config.json'))) {
          copyFileSync(join(args.tokenizer, 'tokenizer_config.json'), join(dir, 'tokenizer_config.json'));
          written.push('tokenizer_config.json');
        }
      } else if (config.architecture !== 'llama' && config.vocabSize >= QWEN_TOKENIZER_VOCAB) {
        const paths = bundledQwenTokenizerPaths();
        copyFileSync(paths.tokenizerJson, join(dir, 'tokenizer.json'));
        copyFileSync(paths.tokenizerConfig, join(dir, 'tokenizer_config.json'));
        written.push('tokenizer.json', 'tokenizer_config.json');
      }
      return written;
    },
    { force: args.force ?? false, label: '--out' },
  );
  const params = countParameters(config);
  return {
    dir: args.out,
    files,
    config,
    summary: `wrote a random ${config.architecture} checkpoint (${(params / 1e6).toFixed(2)}M parameters) to ${args.out}: ${files.join(', ')}`,
  };
}

/**
 * A random checkpoint is written one tensor at a time, so it needs memory for its largest tensor
 * and disk for all of them: refuse, naming the fields, a config whose file would not fit the free
 * space where it goes, or one tensor of which could not be allocated.
 */
function checkCheckpointFits(config: ModelConfig, out: string, dtype: StoredDtype): void {
  const largest = largestTensor(config);
  if (largest.elements > MAX_TENSOR_ELEMENTS || largest.elements * 4 > memoryBoundBytes()) {
    throw new AppError(ErrorCode.VALIDATION, `--config: ${largest.fields} = ${largest.elements.toExponential(3)} values in one tensor (${formatBytes(largest.elements * 4)} as float32), more than can be allocated here (${formatBytes(memoryBoundBytes())} of memory)`);
  }
  const fileBytes = countParameters(config) * (dtype === 'F32' ? 4 : 2);
  let parent = resolve(out);
  while (!existsSync(parent)) parent = dirname(parent);
  const { bavail, bsize } = statfsSync(parent);
  const freeBytes = bavail * bsize;
  if (fileBytes > freeBytes) {
    throw new AppError(
      ErrorCode.VALIDATION,
      `--config: ${countParameters(config).toExponential(3)} parameters (num_hidden_layers ${config.numLayers}, hidden_size ${config.hiddenSize}, intermediate_size ${config.intermediateSize}, vocab_size ${config.vocabSize}) make a ${formatBytes(fileBytes)} ${dtype} checkpoint, more than the ${formatBytes(freeBytes)} free on ${parent}`,
    );
  }
}

/** A preset name, inline JSON, or a JSON file; ModelConfig or Hugging Face shape. */
export function resolveConfigArg(arg: string): ModelConfig {
  if (isPresetName(arg)) return presetConfig(arg);
  let json: unknown;
  const text = arg.trimStart().startsWith('{') ? arg : existsSync(arg) ? readFileSync(arg, 'utf8') : undefined;
  if (text === undefined) throw new AppError(ErrorCode.VALIDATION, `--config: "${arg}" is neither a preset, inline JSON nor an existing JSON file`);
  try {
    json = JSON.parse(text);
  } catch (cause) {
    throw new AppError(ErrorCode.VALIDATION, '--config: not valid JSON', { cause });
  }
  const looksHf = typeof json === 'object' && json !== null && ('architectures' in json || 'model_type' in json || 'hidden_size' in json);
  return looksHf ? parseHfConfig(json) : parseModelConfig(json);
}

export interface ModelLogitsArgs {
  model: string;
  /** A PEFT adapter directory applied on top of the model. */
  adapter?: string;
  /** "1,2,3" or the ids. */
  tokens: string | readonly number[];
  json?: boolean;
  /** Where the session runs (provider, threads, logger); default: onnx-graph's defaults. */
  session?: SessionConfig;
}

/** `model logits`: final-position logits; `output` is what to print. */
export async function modelLogits(args: ModelLogitsArgs): Promise<{ logits: number[]; output: string }> {
  const ids = typeof args.tokens === 'string' ? parseTokenList(args.tokens) : [...args.tokens];
  const { config, weights } = loadModel(args.model);
  for (const id of ids) {
    if (id >= config.vocabSize) throw new AppError(ErrorCode.VALIDATION, `--tokens: id ${id} is outside the vocabulary (${config.vocabSize})`);
  }
  const adapter = args.adapter === undefined ? undefined : loadAdapterDir(args.adapter, config);
  const model = await LogitsModel.create(config, weights, { ...(adapter === undefined ? {} : { lora: adapter.lora }), ...(args.session === undefined ? {} : { session: args.session }) });
  try {
    const [all] = await model.logits([ids], adapter === undefined ? {} : { lora: adapter.weights });
    const logits = Array.from((all as Float32Array).subarray((ids.length - 1) * config.vocabSize));
    if (args.json === true) return { logits, output: JSON.stringify(logits) };
    const top = logits
      .map((value, id) => ({ id, value }))
      .sort((a, b) => b.value - a.value)
      .slice(0, 10);
    return { logits, output: top.map((t) => `${t.id}\t${t.value.toFixed(6)}`).join('\n') };
  } finally {
    await model.close();
  }
}

export function parseTokenList(text: string): number[] {
  const parts = text.split(',').map((s) => s.trim());
  if (parts.length === 0 || parts.some((p) => !/^\d+$/.test(p))) {
    throw new AppError(ErrorCode.VALIDATION, `--tokens: expected comma-separated non-negative integers, got "${text}"`);
  }
  return parts.map(Number);
}

export interface ModelGenerateArgs {
  model: string;
  /** A PEFT adapter directory applied on top of the model. */
  adapter?: string;
  prompt: string;
  maxNewTokens?: number;
  temperature?: number;
  topP?: number;
  topK?: number;
  seed?: number;
  /** Encode the prompt as is, without the chat template. */
  raw?: boolean;
  /** Where the session runs (provider, threads, logger); default: onnx-graph's defaults. */
  session?: SessionConfig;
}

export interface ModelGenerateResult {
  text: string;
  promptIds: number[];
  tokens: number[];
  logprobs: number[];
  finishReason: 'stop' | 'length';
}

/** `model generate`: one continuation of a prompt. */
export async function modelGenerate(args: ModelGenerateArgs): Promise<ModelGenerateResult> {
  const { config, weights } = loadModel(args.model);
  const chat = await loadChatFormat(args.model, { config });
  const tokenizer = chat.tokenizer;
  const promptIds =
    args.raw === true ? tokenizer.encode(args.prompt) : [...chat.userIds(args.prompt), ...chat.generationPromptIds()];
  const adapter: Adapter | undefined = args.adapter === undefined ? undefined : loadAdapterDir(args.adapter, config);
  const generator = await Generator.create(config, weights, { ...(adapter === undefined ? {} : { lora: adapter.lora }), ...(args.session === undefined ? {} : { session: args.session }) });
  try {
    const [result] = await generator.generate(
      [{ promptIds, seed: args.seed ?? 0, temperature: args.temperature ?? 0.7, topP: args.topP ?? 1 }],
      {
        maxNewTokens: args.maxNewTokens ?? 64,
        topK: args.topK ?? 0,
        stopIds: [...new Set([...config.eosTokenIds, ...chat.stopIds])],
        ...(adapter === undefined ? {} : { lora: adapter.weights }),
      },
    );
    if (result === undefined) throw new AppError(ErrorCode.INTERNAL, 'generation returned no result');
    return {
      text: tokenizer.decode(result.tokens, { skipSpecialTokens: true }),
      promptIds,
      tokens: result.tokens,
      logprobs: result.logprobs,
      finishReason: result.finishReason,
    };
  } finally {
    await generator.close();
  }
}

