import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initLoraWeights, parseLoraConfig, parseModelConfig, saveAdapterDir, writeRandomCheckpoint } from '@sqlenv/model';
import { TINY_BYTE_MODEL_CONFIG } from '@sqlenv/model/testing';
import { CompletionRequestSchema, CompletionResponseSchema, ModelListSchema, type CompletionRequest } from '@sqlenv/protocol';
import { startServeModel, type ServeModelProcess } from './serve-model-processes.ts';

/**
 * `sqlenv serve-model` as a real process: it logs its URL, answers completions and adapter loads
 * over HTTP with the API key from its environment variable, and on SIGTERM finishes the request in
 * flight before it exits 0.
 */
const root = mkdtempSync(join(tmpdir(), 'sqlenv-serve-model-'));
const modelDir = join(root, 'tiny');
const adapterDir = join(root, 'adapter');
const API_KEY = 'process-key';
const startServer = (): Promise<ServeModelProcess> =>
  startServeModel(['--model', modelDir, '--port', '0', '--lora-rank', '2', '--lora-alpha', '4', '--max-loras', '2', '--threads', '1', '--max-batch-size', '1', '--served-model-name', 'tiny'], { SQLENV_INFERENCE_API_KEY: API_KEY });

let server: ServeModelProcess;

beforeAll(async () => {
  const config = parseModelConfig(TINY_BYTE_MODEL_CONFIG);
  writeRandomCheckpoint(modelDir, config, { seed: 3, initStd: 0.3 });
  const lora = parseLoraConfig({ rank: 2, alpha: 4 });
  saveAdapterDir(adapterDir, config, { lora, weights: initLoraWeights(config, lora, { seed: 9, bStd: 0.5 }) });
  server = await startServer();
}, 150_000);

afterAll(async () => {
  if (server !== undefined && server.child.exitCode === null) server.child.kill('SIGKILL');
  rmSync(root, { recursive: true, force: true });
});

const auth = { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' };

function completion(model: string, prompt: number[], maxTokens: number): CompletionRequest {
  return CompletionRequestSchema.parse({ model, prompt, max_tokens: maxTokens, seed: 42, logprobs: 0, return_token_ids: true });
}

describe('sqlenv serve-model process', () => {
  it('serves completions of the base model and of an adapter loaded by name', async () => {
    const unauthorized = await fetch(`${server.url}/v1/models`);
    expect(unauthorized.status).toBe(401);
    const load = await fetch(`${server.url}/v1/load_lora_adapter`, { method: 'POST', headers: auth, body: JSON.stringify({ lora_name: 'run-v1', lora_path: adapterDir }) });
    expect(await load.text()).toBe("Success: LoRA adapter 'run-v1' added successfully.");
    const models = ModelListSchema.parse(await (await fetch(`${server.url}/v1/models`, { headers: auth })).json());
    expect(models.data.map((m) => m.id)).toEqual(['tiny', 'run-v1']);
    const answers = await Promise.all(
      ['tiny', 'run-v1'].map(async (model) => {
        const res = await fetch(`${server.url}/v1/completions`, { method: 'POST', headers: auth, body: JSON.stringify(completion(model, [72, 105, 33, 10], 5)) });
        expect(res.status).toBe(200);
        return CompletionResponseSchema.parse(await res.json()).choices[0]!;
      }),
    );
    for (const choice of answers) {
      expect(choice.prompt_token_ids).toEqual([72, 105, 33, 10]);
      expect(choice.logprobs!.token_logprobs).toHaveLength(choice.token_ids!.length);
    }
    expect(answers[0]!.logprobs!.token_logprobs).not.toEqual(answers[1]!.logprobs!.token_logprobs);
  }, 120_000);

  it('on SIGTERM finishes the requests in flight, then exits 0', async () => {
    // One row at a time (--max-batch-size 1): once the first answer is back, the others are still queued or running.
    const requests = Array.from({ length: 6 }, (_, i) => fetch(`${server.url}/v1/completions`, { method: 'POST', headers: auth, body: JSON.stringify(completion('tiny', [1, 2, 3 + i], 48)) }));
    let answered = 0;
    for (const request of requests) void request.then(() => (answered += 1), () => undefined);
    await Promise.any(requests);
    // Every request has reached the server (held there, or answered) before the signal: one still on
    // its way on a loaded machine would be refused while the server drains (503), rightly.
    for (;;) {
      const before = answered;
      const metrics = await (await fetch(`${server.url}/metrics`, { headers: auth })).text();
      const held = Number(/^sqlenv_model_server_requests_in_flight (\d+)/m.exec(metrics)?.[1] ?? 0);
      if (held + before >= requests.length) break;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    server.child.kill('SIGTERM');
    const answers = await Promise.all(requests);
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200]);
    for (const res of answers) expect(CompletionResponseSchema.parse(await res.json()).usage.prompt_tokens).toBe(3);
    expect(await server.exited).toEqual({ code: 0, signal: null });
    expect(server.logs.join('\n')).toMatch(/model server closed/);
  }, 120_000);
});
