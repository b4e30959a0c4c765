import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { basename, resolve } from 'node:path';
import { z } from 'zod';
import {
  InferenceEngine,
  loadAdapterDir,
  loadChatFormat,
  loraConfigSchema,
  readModelConfig,
  zeroLoraWeights,
  type Adapter,
  type InferenceEngineOptions,
  type LoraConfig,
  type ModelConfig,
  type TextTokenizer,
} from '@sqlenv/model';
import { CompletionRequestSchema, LoadLoraAdapterRequestSchema, UnloadLoraAdapterRequestSchema, type ModelList } from '@sqlenv/protocol';
import { AppError, ErrorCode, bearerToken, formatZodIssues, readJsonBody, sendJson, sendText, silentLogger, tokenMatches, type Logger } from '@sqlenv/shared';
import { AdapterRegistry, notFound } from './adapter-registry.ts';
import { parseBody, sendApiError, sendThrown } from './api-errors.ts';
import { checkSupported, completionResponse, turnOf, type EngineLimits } from './completion-turn.ts';
import { ContextCache } from './context-cache.ts';
import { ModelGate } from './model-gate.ts';
import { ModelServerMetrics } from './model-server-metrics.ts';

/** Engine settings the server passes through (model, LoRA shape, top-k and stop ids are the server's). */
export type ModelServerEngineOptions = Omit<InferenceEngineOptions, 'modelDir' | 'lora' | 'topK' | 'stopIds'>;

export const modelServerOptionsSchema = z.object({
  /** Checkpoint directory (config.json + safetensors, tokenizer.json when there is one). */
  modelDir: z.string().min(1),
  /** The base model's served name. Default: the model directory's basename. */
  servedModelName: z.string().min(1).optional(),
  /**
   * A PEFT adapter directory whose weights ARE the base model's (the policy to serve under the base
   * name); its shape is the LoRA shape every loaded adapter must have.
   */
  adapterDir: z.string().min(1).optional(),
  /** LoRA shape of the adapters to load, when no `adapterDir` gives it. Default: loraConfigSchema's. */
  lora: loraConfigSchema.optional(),
  /** Most adapters loaded at once besides the base; 0 = an engine without LoRA inputs (unless `adapterDir`). */
  maxLoras: z.number().int().nonnegative().default(4),
  host: z.string().min(1).default('127.0.0.1'),
  /** 0 = any free port (`ModelServer.url` says which). */
  port: z.number().int().min(0).max(65_535).default(8001),
  /** Every /v1 route then needs `Authorization: Bearer <apiKey>`. */
  apiKey: z.string().min(1).optional(),
  maxBodyBytes: z.number().int().positive().default(4 * 1024 * 1024),
  /** Completion requests held at once (running or waiting for their model); past it 503. */
  maxPendingRequests: z.number().int().positive().default(1024),
  /** Prompt + completion tokens; default and bound: the model's max_position_embeddings. */
  maxModelLen: z.number().int().positive().optional(),
  /** Recorded contexts (prompt ++ completion → engine cacheKey) kept for KV reuse. */
  maxKeptContexts: z.number().int().positive().default(1024),
  /** The engine's top-k for every request (0 = off); requests must ask for the same. */
  topK: z.number().int().nonnegative().default(0),
  /** Engine settings (batch size, provider, threads, replicas, ...); checked by InferenceEngine.start. */
  engine: z.custom<ModelServerEngineOptions>((v) => typeof v === 'object' && v !== null && !Array.isArray(v)).default({}),
  /** Process metrics (RSS, event loop) in /metrics. */
  defaultMetrics: z.boolean().default(true),
});
export type ModelServerOptions = z.input<typeof modelServerOptionsSchema>;
type Options = z.output<typeof modelServerOptionsSchema>;

interface Model {
  config: ModelConfig;
  tokenizer: TextTokenizer | null;
  stopIds: number[];
  lora: LoraConfig | null;
  adapter: Adapter | null;
}

type Handler = (req: IncomingMessage, res: ServerResponse) => Promise<void> | void;

/** The message of the log line a server writes once it listens (with its `url`): what a supervisor waits for. */
export const LISTENING_MESSAGE = 'model server listening';

/** The `url` of a JSON log line that says the server listens; undefined for any other line. */
export function listeningUrlOf(line: string): string | undefined {
  try {
    const entry = JSON.parse(line) as { msg?: unknown; url?: unknown };
    return entry.msg === LISTENING_MESSAGE && typeof entry.url === 'string' ? entry.url : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The project's InferenceEngine behind vLLM's OpenAI-compatible completions contract
 * (docs/remote-inference.md): `/v1/completions` on token ids, runtime LoRA adapters by name,
 * `/v1/models`, `/health`, `/metrics`. One engine holds one adapter, so a ModelGate runs one served
 * model's requests at a time.
 */
export class ModelServer {
  readonly engine: InferenceEngine;
  readonly metrics: ModelServerMetrics;
  readonly #options: Options;
  readonly #model: Model;
  readonly #limits: EngineLimits;
  readonly #registry: AdapterRegistry;
  readonly #gate: ModelGate;
  readonly #contexts: ContextCache;
  readonly #log: Logger;
  readonly #http: Server;
  readonly #routes: Map<string, Handler>;
  #version = 0;
  #pending = 0;
  #drained: (() => void) | undefined;
  #closing: Promise<void> | undefined;

  private constructor(options: Options, model: Model, engine: InferenceEngine, log: Logger) {
    this.#options = options;
    this.#model = model;
    this.engine = engine;
    this.#log = log;
    const maxModelLen = Math.min(options.maxModelLen ?? model.config.maxPositionEmbeddings, model.config.maxPositionEmbeddings);
    this.#limits = { maxModelLen, vocabSize: model.config.vocabSize, topK: options.topK, stopIds: model.stopIds, eosIds: model.config.eosTokenIds };
    const baseWeights = model.adapter?.weights ?? (model.lora === null ? null : zeroLoraWeights(model.config, model.lora));
    const baseName = options.servedModelName ?? basename(resolve(options.modelDir));
    this.#registry = new AdapterRegistry({ baseName, config: model.config, lora: model.lora, baseWeights, maxLoras: options.maxLoras, maxModelLen });
    this.#gate = new ModelGate(baseName, (name) => this.#activate(name));
    this.#contexts = new ContextCache(options.maxKeptContexts);
    this.metrics = new ModelServerMetrics(() => engine.stats, { defaultMetrics: options.defaultMetrics });
    this.#routes = new Map<string, Handler>([
      ['GET /health', (_req, res) => sendText(res, 200, 'text/plain', '')],
      ['GET /metrics', async (_req, res) => {
        const { contentType, body } = await this.metrics.render();
        sendText(res, 200, contentType, body);
      }],
      ['GET /v1/models', (_req, res) => sendJson(res, 200, { object: 'list', data: this.#registry.cards() } satisfies ModelList)],
      ['POST /v1/completions', (req, res) => this.#complete(req, res)],
      ['POST /v1/load_lora_adapter', (req, res) => this.#loadAdapter(req, res)],
      ['POST /v1/unload_lora_adapter', (req, res) => this.#unloadAdapter(req, res)],
    ]);
    this.#http = createServer((req, res) => this.#dispatch(req, res));
    // Slow-loris bodies and dead keep-alive sockets must not hold the process open forever.
    this.#http.headersTimeout = 30_000;
  }

  /** Load the model, start the engine and listen. */
  static async start(input: ModelServerOptions, logger: Logger = silentLogger): Promise<ModelServer> {
    const parsed = modelServerOptionsSchema.safeParse(input);
    if (!parsed.success) throw new AppError(ErrorCode.VALIDATION, `invalid model server options: ${formatZodIssues(parsed.error)}`);
    const options = parsed.data;
    const log = logger.child({ component: 'model-server' });
    const model = await loadModel(options, log);
    const engine = await InferenceEngine.start(
      { ...options.engine, modelDir: options.modelDir, ...(model.lora === null ? {} : { lora: model.lora }), topK: options.topK, stopIds: model.stopIds },
      log.child({ role: 'engine' }),
    );
    const server = new ModelServer(options, model, engine, log);
    try {
      if (model.adapter !== null) await engine.setLora(model.adapter.weights, 0);
      await server.#listen();
    } catch (error) {
      await engine.close();
      throw error;
    }
    log.info({ url: server.url, model: server.servedModelName, maxModelLen: server.#limits.maxModelLen, lora: model.lora, maxLoras: options.maxLoras, auth: options.apiKey !== undefined }, LISTENING_MESSAGE);
    return server;
  }

  /** Ids the engine stops at: a request's stop_token_ids with the model's EOS ids must be these. */
  get stopIds(): readonly number[] {
    return this.#limits.stopIds;
  }

  get servedModelName(): string {
    return this.#registry.baseName;
  }

  get url(): string {
    const address = this.#http.address() as AddressInfo;
    const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
    return `http://${host}:${address.port}`;
  }

  /** Stop accepting, let the requests in flight finish, close the engine. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      const closed = new Promise<void>((done) => this.#http.close(() => done()));
      this.#http.closeIdleConnections();
      if (this.#pending > 0) await new Promise<void>((done) => (this.#drained = done));
      this.#http.closeIdleConnections();
      await closed;
      await this.engine.close();
      this.#log.info('model server closed');
    })();
    return this.#closing;
  }

  #listen(): Promise<void> {
    return new Promise((done, fail) => {
      this.#http.once('error', fail);
      this.#http.listen(this.#options.port, this.#options.host, () => {
        this.#http.off('error', fail);
        done();
      });
    });
  }

  #dispatch(req: IncomingMessage, res: ServerResponse): void {
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    const key = `${req.method ?? 'GET'} ${path}`;
    const handler = this.#routes.get(key);
    res.on('finish', () => this.metrics.requestsTotal.inc({ route: handler === undefined ? 'other' : path, status: String(res.statusCode) }));
    if (path.startsWith('/v1/') && !this.#authorized(req)) {
      // vLLM's own body for a missing or wrong key.
      sendJson(res, 401, { error: 'Unauthorized' }, { 'www-authenticate': 'Bearer' });
      req.resume();
      return;
    }
    if (handler === undefined) {
      const known = [...this.#routes.keys()].some((k) => k.endsWith(` ${path}`));
      sendApiError(res, known ? 405 : 404, known ? `Method ${req.method ?? ''} not allowed on ${path}` : `Not Found: ${path}`);
      req.resume();
      return;
    }
    Promise.resolve()
      .then(() => handler(req, res))
      .catch((error: unknown) => {
        if (res.headersSent) {
          res.destroy();
          return;
        }
        const status = sendThrown(res, error);
        if (status >= 500) this.#log.error({ err: error, path }, 'request failed');
      });
  }

  #authorized(req: IncomingMessage): boolean {
    const key = this.#options.apiKey;
    if (key === undefined) return true;
    const token = bearerToken(req);
    return token !== undefined && tokenMatches(token, key);
  }

  async #body(req: IncomingMessage): Promise<unknown> {
    const body = await readJsonBody(req, this.#options.maxBodyBytes);
    if (body.ok) return body.value;
    if (body.status === 413) throw new AppError(ErrorCode.VALIDATION, body.message, { details: { status: 413 } });
    throw new AppError(ErrorCode.VALIDATION, body.message);
  }

  async #complete(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const request = parseBody(CompletionRequestSchema, await this.#body(req));
    if (!this.#registry.has(request.model)) throw notFound(request.model);
    checkSupported(request, this.#limits);
    if (this.#closing !== undefined) throw new AppError(ErrorCode.ABORTED, 'the server is shutting down');
    if (this.#pending >= this.#options.maxPendingRequests) {
      throw new AppError(ErrorCode.CAPACITY, `the server holds ${this.#pending} completion requests, its bound (--max-pending-requests); retry later`);
    }
    this.#pending++;
    this.metrics.requestsInFlight.inc();
    try {
      await this.#gate.acquire(request.model);
      try {
        const partition = `${request.model}\u0000${request.cache_salt ?? ''}`;
        const cacheKey = this.#contexts.claim(partition, request.prompt) ?? `ctx-${randomUUID()}`;
        const result = await this.engine.generate(turnOf(request, cacheKey));
        this.#contexts.record(partition, [...request.prompt, ...result.tokens], cacheKey);
        this.metrics.promptTokensTotal.inc({ model: request.model }, request.prompt.length);
        this.metrics.generatedTokensTotal.inc({ model: request.model }, result.tokens.length);
        const meta = { id: `cmpl-${randomUUID().replaceAll('-', '')}`, createdS: Math.floor(Date.now() / 1000), tokenizer: this.#model.tokenizer, eosIds: this.#limits.eosIds };
        sendJson(res, 200, completionResponse(request, result, meta));
      } finally {
        this.#gate.release();
      }
    } finally {
      this.#pending--;
      this.metrics.requestsInFlight.dec();
      if (this.#pending === 0) this.#drained?.();
    }
  }

  async #loadAdapter(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { lora_name, lora_path } = parseBody(LoadLoraAdapterRequestSchema, await this.#body(req));
    this.#registry.load(lora_name, lora_path);
    this.metrics.loadedAdapters.set(this.#registry.size);
    this.#log.info({ loraName: lora_name, loraPath: lora_path, loaded: this.#registry.size }, 'adapter loaded');
    sendText(res, 200, 'text/plain; charset=utf-8', `Success: LoRA adapter '${lora_name}' added successfully.`);
  }

  async #unloadAdapter(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { lora_name } = parseBody(UnloadLoraAdapterRequestSchema, await this.#body(req));
    this.#registry.unload(lora_name);
    this.#gate.forget(lora_name);
    this.#contexts.dropPartitions((p) => p.startsWith(`${lora_name}\u0000`));
    this.metrics.loadedAdapters.set(this.#registry.size);
    this.#log.info({ loraName: lora_name, loaded: this.#registry.size }, 'adapter unloaded');
    sendText(res, 200, 'text/plain; charset=utf-8', `Success: LoRA adapter '${lora_name}' removed successfully.`);
  }

  /** The gate's switch: the engine takes the served model's LoRA tensors as a new version. */
  async #activate(name: string): Promise<void> {
    const weights = this.#registry.weights(name);
    this.#version++;
    await this.engine.setLora(weights, this.#version);
    this.#log.debug({ model: name, version: this.#version }, 'served model switched');
  }
}

async function loadModel(options: Options, log: Logger): Promise<Model> {
  const config = readModelConfig(options.modelDir);
  // Without a tokenizer the server still serves token ids: `text` is then empty.
  const chat = await loadChatFormat(options.modelDir, { config }).catch((error: unknown) => {
    log.warn({ err: error }, 'no tokenizer: completions carry token ids and empty text');
    return null;
  });
  const stopIds = [...new Set([...(chat?.stopIds ?? []), ...config.eosTokenIds])];
  const adapter = options.adapterDir === undefined ? null : loadAdapterDir(options.adapterDir, config);
  if (adapter !== null && options.lora !== undefined) {
    throw new AppError(ErrorCode.VALIDATION, 'give either an adapter directory (its LoRA shape) or a LoRA shape, not both');
  }
  const lora = adapter?.lora ?? (options.maxLoras > 0 ? loraConfigSchema.parse(options.lora ?? {}) : null);
  return { config, tokenizer: chat?.tokenizer ?? null, stopIds, lora, adapter };
}
