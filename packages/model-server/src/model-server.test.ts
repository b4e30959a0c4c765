import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InferenceEngine, initLoraWeights, parseLoraConfig, parseModelConfig, saveAdapterDir, writeRandomCheckpoint, type LoraWeights, type TurnResult } from '@sqlenv/model';
import { TINY_BYTE_MODEL_CONFIG } from '@sqlenv/model/testing';
import { ApiErrorSchema, CompletionRequestSchema, CompletionResponseSchema, ModelListSchema, type CompletionRequest, type CompletionResponse } from '@sqlenv/protocol';
import { ModelServer } from './model-server.ts';

/**
 * The server over real HTTP against the engine in this process: the same seeds give the same
 * tokens and log-probs, later turns continue their episode's KV cache, adapters load by name and
 * sample as the engine does with that adapter set, and refusals come in vLLM's error shape.
 */
const root = mkdtempSync(join(tmpdir(), 'sqlenv-model-server-'));
const modelDir = join(root, 'tiny');
const adapterDir = join(root, 'adapter');
const config = parseModelConfig(TINY_BYTE_MODEL_CONFIG);
const lora = parseLoraConfig({ rank: 2, alpha: 4 });
const API_KEY = 'test-key';
const ENGINE = { maxBatchSize: 8, batchWindowMs: 2, lengthBucketTokens: 8 };

let server: ModelServer;
let reference: InferenceEngine;
let adapterWeights: LoraWeights;

beforeAll(async () => {
  writeRandomCheckpoint(modelDir, config, { seed: 11, initStd: 0.3 });
  adapterWeights = initLoraWeights(config, lora, { seed: 5, bStd: 0.5 });
  saveAdapterDir(adapterDir, config, { lora, weights: adapterWeights });
  server = await ModelServer.start({ modelDir, port: 0, apiKey: API_KEY, maxLoras: 1, lora, defaultMetrics: false, engine: ENGINE });
  reference = await InferenceEngine.start({ modelDir, lora, stopIds: [...server.stopIds], topK: 0, ...ENGINE });
}, 180_000);

afterAll(async () => {
  await server?.close();
  await reference?.close();
  rmSync(root, { recursive: true, force: true });
});

async function post(path: string, body: unknown, key: string | null = API_KEY): Promise<{ status: number; json: unknown; text: string }> {
  const res = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key === null ? {} : { authorization: `Bearer ${key}` }) },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: unknown = null;
  try {
    json = JSON.parse(text);
  } catch {
    json = null;
  }
  return { status: res.status, json, text };
}

/** Every field sent, as a client must: the schema's defaults for the rest, then the test's. */
function request(model: string, prompt: number[], seed: number, overrides: Partial<CompletionRequest> = {}): CompletionRequest {
  return CompletionRequestSchema.parse({ model, prompt, seed, max_tokens: 6, logprobs: 0, return_token_ids: true, stop_token_ids: [...server.stopIds], skip_special_tokens: false, cache_salt: '0', ...overrides });
}

async function complete(body: CompletionRequest): Promise<CompletionResponse> {
  const { status, json } = await post('/v1/completions', body);
  expect(status, JSON.stringify(json)).toBe(200);
  return CompletionResponseSchema.parse(json);
}

interface Episode {
  seed: number;
  temperature: number;
  topP: number;
  observations: number[][];
}

const episodes: Episode[] = Array.from({ length: 4 }, (_, e) => ({
  seed: 100 + e,
  temperature: e === 0 ? 0 : 1,
  topP: e === 3 ? 0.9 : 1,
  observations: Array.from({ length: 4 }, (_, t) => Array.from({ length: t === 0 ? 40 : 10 }, (_, i) => (i * 31 + e * 17 + t * 7) % 250)),
}));

/** Every episode's turns, concurrently, whole context each turn; `sample` returns tokens and log-probs. */
interface Sampled {
  tokens: number[];
  logprobs: number[];
  finish: string | null;
}

async function play(sample: (e: Episode, context: number[], seed: number) => Promise<Sampled>): Promise<Sampled[][]> {
  return Promise.all(
    episodes.map(async (e) => {
      const context: number[] = [];
      const turns: Sampled[] = [];
      for (const [t, observation] of e.observations.entries()) {
        context.push(...observation);
        const turn = await sample(e, [...context], e.seed * 10 + t);
        turns.push(turn);
        context.push(...turn.tokens);
      }
      return turns;
    }),
  );
}

const viaEngine = (engine: InferenceEngine, tag: string) => async (e: Episode, context: number[], seed: number) => {
  const r: TurnResult = await engine.generate({ promptIds: context, maxNewTokens: 6, seed, temperature: e.temperature, topP: e.topP, cacheKey: `${tag}-${e.seed}` });
  return { tokens: r.tokens, logprobs: e.topP < 1 ? r.sampleLogprobs : r.logprobs, finish: r.finishReason };
};

const viaServer = (model: string) => async (e: Episode, context: number[], seed: number) => {
  const response = await complete(request(model, context, seed, { temperature: e.temperature, top_p: e.topP }));
  const choice = response.choices[0]!;
  expect(choice.prompt_token_ids).toEqual(context);
  expect(response.usage).toEqual({ prompt_tokens: context.length, completion_tokens: choice.token_ids!.length, total_tokens: context.length + choice.token_ids!.length });
  return { tokens: choice.token_ids!, logprobs: choice.logprobs!.token_logprobs, finish: choice.finish_reason };
};

function maxLogprobGap(a: Sampled[][], b: Sampled[][]): number {
  let gap = 0;
  a.forEach((turns, e) =>
    turns.forEach((turn, t) => {
      const want = b[e]![t]!;
      expect({ e, t, tokens: turn.tokens, finish: turn.finish }).toEqual({ e, t, tokens: want.tokens, finish: want.finish });
      turn.logprobs.forEach((lp, i) => (gap = Math.max(gap, Math.abs(lp - want.logprobs[i]!))));
    }),
  );
  return gap;
}

describe('ModelServer completions', () => {
  it('samples the same tokens and log-probs as the engine in process, continuing each episode’s KV cache', async () => {
    const before = server.engine.stats;
    const served = await play(viaServer(server.servedModelName));
    const after = server.engine.stats;
    const expected = await play(viaEngine(reference, 'base'));
    expect(maxLogprobGap(served, expected)).toBeLessThanOrEqual(1e-4);
    // Some turns end at a stop token (finish_reason stop), the others at max_tokens.
    expect(new Set(served.flat().map((t) => t.finish))).toEqual(new Set(['stop', 'length']));
    // Turns 1..3 of each episode continue the cache of prompt ++ completion of the turn before.
    const laterPromptTokens = episodes.length * [1, 2, 3].reduce((sum, t) => sum + 40 + t * 16, 0);
    expect(after.reusedTokens - before.reusedTokens).toBeGreaterThanOrEqual(laterPromptTokens - episodes.length * 3 * 11);
    expect(after.turns - before.turns).toBe(episodes.length * 4);
  }, 120_000);

  it('answers in vLLM’s shape: text, stop reason, usage', async () => {
    const response = await complete(request(server.servedModelName, [72, 105, 33], 7, { max_tokens: 3 }));
    expect(response.object).toBe('text_completion');
    expect(response.model).toBe(server.servedModelName);
    const choice = response.choices[0]!;
    expect(choice.finish_reason === 'length' || choice.finish_reason === 'stop').toBe(true);
    expect(choice.logprobs!.tokens).toHaveLength(choice.token_ids!.length);
    expect(typeof choice.text).toBe('string');
  }, 60_000);
});

describe('ModelServer adapters', () => {
  const name = 'run-v1';

  it('loads a PEFT adapter by name, samples as the engine with it set, keeps the base model apart, unloads', async () => {
    const loaded = await post('/v1/load_lora_adapter', { lora_name: name, lora_path: adapterDir });
    expect(loaded).toMatchObject({ status: 200, text: `Success: LoRA adapter '${name}' added successfully.` });
    const again = await post('/v1/load_lora_adapter', { lora_name: name, lora_path: adapterDir });
    expect(again.status).toBe(400);
    expect(ApiErrorSchema.parse(again.json).param).toBe('lora_name');
    const bound = await post('/v1/load_lora_adapter', { lora_name: 'run-v2', lora_path: adapterDir });
    expect(bound.status).toBe(400);
    expect(ApiErrorSchema.parse(bound.json).message).toMatch(/--max-loras 1/);

    const models = ModelListSchema.parse(await (await fetch(`${server.url}/v1/models`, { headers: { authorization: `Bearer ${API_KEY}` } })).json());
    expect(models.data.map((m) => [m.id, m.parent])).toEqual([
      [server.servedModelName, null],
      [name, server.servedModelName],
    ]);

    // Base and adapter requests at once: the gate runs one model at a time, each matches its own engine.
    const [servedAdapter, servedBase] = await Promise.all([play(viaServer(name)), play(viaServer(server.servedModelName))]);
    const expectedBase = await play(viaEngine(reference, 'base-again'));
    await reference.setLora(adapterWeights, 1);
    const expectedAdapter = await play(viaEngine(reference, 'adapter'));
    expect(maxLogprobGap(servedBase, expectedBase)).toBeLessThanOrEqual(1e-4);
    expect(maxLogprobGap(servedAdapter, expectedAdapter)).toBeLessThanOrEqual(1e-4);
    expect(servedAdapter.flat().map((t) => t.logprobs)).not.toEqual(servedBase.flat().map((t) => t.logprobs));

    const unloaded = await post('/v1/unload_lora_adapter', { lora_name: name });
    expect(unloaded.status).toBe(200);
    expect((await post('/v1/unload_lora_adapter', { lora_name: name })).status).toBe(404);
    const gone = await post('/v1/completions', request(name, [1, 2, 3], 1));
    expect(gone.status).toBe(404);
    expect(gone.json).toEqual({ object: 'error', message: `The model \`${name}\` does not exist.`, type: 'NotFoundError', param: null, code: 404 });
  }, 240_000);

  it('serves the new weights of a name unloaded and loaded again from another directory', async () => {
    const otherWeights = initLoraWeights(config, lora, { seed: 77, bStd: 0.5 });
    const otherDir = join(root, 'adapter-2');
    saveAdapterDir(otherDir, config, { lora, weights: otherWeights });
    expect((await post('/v1/load_lora_adapter', { lora_name: name, lora_path: adapterDir })).status).toBe(200);
    await complete(request(name, [5, 6, 7], 1));
    expect((await post('/v1/unload_lora_adapter', { lora_name: name })).status).toBe(200);
    expect((await post('/v1/load_lora_adapter', { lora_name: name, lora_path: otherDir })).status).toBe(200);
    const served = await play(viaServer(name));
    await reference.setLora(otherWeights, 2);
    expect(maxLogprobGap(served, await play(viaEngine(reference, 'adapter-2')))).toBeLessThanOrEqual(1e-4);
    expect((await post('/v1/unload_lora_adapter', { lora_name: name })).status).toBe(200);
  }, 120_000);

  it('refuses an adapter directory that is missing or of another LoRA shape, naming lora_path', async () => {
    const missing = await post('/v1/load_lora_adapter', { lora_name: 'x', lora_path: join(root, 'nope') });
    expect(missing.status).toBe(400);
    expect(ApiErrorSchema.parse(missing.json).param).toBe('lora_path');
    const otherDir = join(root, 'rank4');
    const other = parseLoraConfig({ rank: 4, alpha: 8 });
    saveAdapterDir(otherDir, config, { lora: other, weights: initLoraWeights(config, other, { seed: 1 }) });
    const shaped = await post('/v1/load_lora_adapter', { lora_name: 'y', lora_path: otherDir });
    expect(shaped.status).toBe(400);
    expect(ApiErrorSchema.parse(shaped.json).message).toMatch(/r=4 .* is not the server's r=2/);
  });
});

describe('ModelServer refusals', () => {
  const base = (): string => server.servedModelName;

  it('needs the API key on /v1 routes, not on /health', async () => {
    expect((await post('/v1/completions', request(base(), [1], 1), null)).status).toBe(401);
    const wrong = await post('/v1/completions', request(base(), [1], 1), 'wrong');
    expect(wrong).toMatchObject({ status: 401, json: { error: 'Unauthorized' } });
    const health = await fetch(`${server.url}/health`);
    expect(health.status).toBe(200);
    expect(await health.text()).toBe('');
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    expect(metrics).toMatch(/sqlenv_model_server_requests_total\{route="\/v1\/completions",status="200"\}/);
    expect(metrics).toMatch(/sqlenv_model_server_engine_stat\{stat="reusedTokens"\}/);
  });

  it('answers 404 for unknown routes and 400 for malformed JSON, in the error shape', async () => {
    const route = await post('/v1/chat/nothing', {});
    expect(route.status).toBe(404);
    expect(ApiErrorSchema.parse(route.json).code).toBe(404);
    const bad = await post('/v1/completions', '{"model": ');
    expect(bad.status).toBe(400);
    expect(ApiErrorSchema.parse(bad.json).message).toMatch(/Invalid JSON/);
  });

  it('answers 413 for a body over the limit', async () => {
    const huge = JSON.stringify({ ...request(base(), [1], 1), padding: 'x'.repeat(4 * 1024 * 1024 + 16) });
    const res = await post('/v1/completions', huge);
    expect(res.status).toBe(413);
    expect(ApiErrorSchema.parse(res.json).type).toBe('RequestEntityTooLargeError');
  });

  it.each([
    ['max_tokens', { max_tokens: 'ten' }],
    ['prompt', { prompt: 'text' }],
    ['top_p', { top_p: 1.5 }],
    ['min_p', { min_p: 0.1 }],
    ['n', { n: 2 }],
    ['repetition_penalty', { repetition_penalty: 1.1 }],
    ['logprobs', { logprobs: 5 }],
    ['top_k', { top_k: 20 }],
    ['stream', { stream: true }],
    ['stop_token_ids', { stop_token_ids: [5] }],
    ['prompt', { prompt: [999] }],
    ['max_tokens', { max_tokens: 9000 }],
  ])('refuses %s with 400 naming the field (%j)', async (field, overrides) => {
    const res = await post('/v1/completions', { ...request(base(), [1, 2], 1), ...overrides });
    expect(res.status, res.text).toBe(400);
    const error = ApiErrorSchema.parse(res.json);
    expect(error).toMatchObject({ object: 'error', type: 'BadRequestError', param: field, code: 400 });
    expect(error.message).toContain(field);
  });
});

describe('ModelServer started with an adapter as the base model', () => {
  it('serves the adapter’s policy under the base name', async () => {
    const adapted = await ModelServer.start({ modelDir, adapterDir, servedModelName: 'policy', port: 0, maxLoras: 0, defaultMetrics: false, engine: ENGINE });
    try {
      const prompt = [10, 20, 30, 40];
      const body = { ...request('policy', prompt, 9), stop_token_ids: [...adapted.stopIds] };
      const res = await fetch(`${adapted.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      const choice = CompletionResponseSchema.parse(await res.json()).choices[0]!;
      await reference.setLora(adapterWeights, 3);
      const want = await reference.generate({ promptIds: prompt, maxNewTokens: 6, seed: 9, temperature: 1 });
      expect(choice.token_ids).toEqual(want.tokens);
      choice.logprobs!.token_logprobs.forEach((lp, i) => expect(Math.abs(lp - want.logprobs[i]!)).toBeLessThanOrEqual(1e-4));
      const load = await fetch(`${adapted.url}/v1/load_lora_adapter`, { method: 'POST', body: JSON.stringify({ lora_name: 'x', lora_path: adapterDir }) });
      expect(load.status).toBe(400);
      expect(ApiErrorSchema.parse(await load.json()).message).toMatch(/--max-loras 0/);
    } finally {
      await adapted.close();
    }
  }, 120_000);
});
