import { checkSameLora, loadAdapterDir, type LoraConfig, type LoraWeights, type ModelConfig } from '@sqlenv/model';
import type { ModelCard } from '@sqlenv/protocol';
import { AppError, ErrorCode, toAppError } from '@sqlenv/shared';
import { refuse } from './api-errors.ts';

interface LoadedAdapter {
  path: string;
  weights: LoraWeights;
  createdS: number;
}

/**
 * The served model names: the base model (its weights: zero LoRA, or the adapter the server was
 * started with) and at most `maxLoras` adapters loaded by name, vLLM's semantics: loading a loaded
 * name is a 400, unloading an unknown one a 404, a name is never reloaded in place.
 */
export class AdapterRegistry {
  readonly baseName: string;
  readonly #config: ModelConfig;
  readonly #lora: LoraConfig | null;
  readonly #baseWeights: LoraWeights | null;
  readonly #maxLoras: number;
  readonly #maxModelLen: number;
  readonly #createdS = nowS();
  readonly #adapters = new Map<string, LoadedAdapter>();

  constructor(options: { baseName: string; config: ModelConfig; lora: LoraConfig | null; baseWeights: LoraWeights | null; maxLoras: number; maxModelLen: number }) {
    this.baseName = options.baseName;
    this.#config = options.config;
    this.#lora = options.lora;
    this.#baseWeights = options.baseWeights;
    this.#maxLoras = options.maxLoras;
    this.#maxModelLen = options.maxModelLen;
  }

  get size(): number {
    return this.#adapters.size;
  }

  has(model: string): boolean {
    return model === this.baseName || this.#adapters.has(model);
  }

  /** The LoRA tensors a served model runs with (null: the engine has no LoRA inputs). */
  weights(model: string): LoraWeights | null {
    if (model === this.baseName) return this.#baseWeights;
    const adapter = this.#adapters.get(model);
    if (adapter === undefined) throw notFound(model);
    return adapter.weights;
  }

  /** Read a PEFT adapter directory (as this server sees it) and serve it as `name`. */
  load(name: string, path: string): void {
    if (this.has(name)) throw refuse('lora_name', `The lora adapter '${name}' has already been loaded.`);
    if (this.#lora === null) throw refuse('lora_name', 'this server was started with --max-loras 0: it serves no adapters');
    if (this.#adapters.size >= this.#maxLoras) {
      throw refuse('lora_name', `cannot load '${name}': ${this.#adapters.size} adapters are loaded, the bound is --max-loras ${this.#maxLoras}; unload one first`);
    }
    let weights: LoraWeights;
    try {
      const adapter = loadAdapterDir(path, this.#config);
      checkSameLora(adapter.lora, this.#lora, path, "the server's");
      weights = adapter.weights;
    } catch (error) {
      throw refuse('lora_path', `cannot load adapter '${name}': ${toAppError(error).message}`);
    }
    this.#adapters.set(name, { path, weights, createdS: nowS() });
  }

  unload(name: string): void {
    if (name === this.baseName) throw refuse('lora_name', `'${name}' is the base model, not an adapter`);
    if (!this.#adapters.delete(name)) throw new AppError(ErrorCode.NOT_FOUND, `The lora adapter '${name}' cannot be found.`, { details: { param: 'lora_name' } });
  }

  /** `GET /v1/models` entries: the base first, then the adapters in load order. */
  cards(): ModelCard[] {
    const base: ModelCard = { id: this.baseName, object: 'model', created: this.#createdS, owned_by: 'sqlenv', root: this.baseName, parent: null, max_model_len: this.#maxModelLen };
    const adapters = [...this.#adapters].map(([id, a]): ModelCard => ({ id, object: 'model', created: a.createdS, owned_by: 'sqlenv', root: a.path, parent: this.baseName, max_model_len: this.#maxModelLen }));
    return [base, ...adapters];
  }
}

export function notFound(model: string): AppError {
  // vLLM's exact body for it: param null.
  return new AppError(ErrorCode.NOT_FOUND, `The model \`${model}\` does not exist.`);
}

function nowS(): number {
  return Math.floor(Date.now() / 1000);
}
