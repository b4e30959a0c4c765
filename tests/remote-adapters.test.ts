import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdapterManager, InferencePool, RemoteCompletionSource, type InferenceServer } from '@sqlenv/agents';
import { encodeAdapter, initLoraWeights, parseLoraConfig, readModelConfig } from '@sqlenv/model';
import { ModelListSchema, type SqlObservation } from '@sqlenv/protocol';
import { publishAdapterVersion, sharedAdapterDir } from '@sqlenv/rollout';
import { answeredRequests, runSqlenv, startServeModel, type ServeModelProcess } from './serve-model-processes.ts';

/**
 * Policy versions as adapters on a real `sqlenv serve-model`: published to a share as the trainer
 * does, loaded by name before the first turn that needs them, unloaded once no turn uses them (at
 * most staleness bound + 2 per server), and loaded again after the server restarts.
 */
const root = mkdtempSync(join(tmpdir(), 'sqlenv-remote-adapters-'));
const modelDir = join(root, 'tiny-qwen3');
const share = join(root, 'share');
const RUN = 'run1';
const serveArgs = ['--model', modelDir, '--threads', '1', '--max-batch-size', '2', '--served-model-name', 'tiny', '--lora-rank', '2', '--lora-alpha', '4', '--max-loras', '4'];
let server: ServeModelProcess;

beforeAll(async () => {
  const init = await runSqlenv(['model', 'init', '--config', 'tiny-qwen3', '--out', modelDir, '--seed', '2']);
  expect(init.code, init.stderr).toBe(0);
  server = await startServeModel([...serveArgs, '--port', '0']);
}, 300_000);

afterAll(async () => {
  await server?.stop();
  rmSync(root, { recursive: true, force: true });
});

async function served(url: string): Promise<string[]> {
  const list = ModelListSchema.parse(await (await fetch(`${url}/v1/models`)).json());
  return list.data.map((m) => m.id);
}

function publish(version: number): void {
  const config = readModelConfig(modelDir);
  const lora = parseLoraConfig({ rank: 2, alpha: 4 });
  publishAdapterVersion(share, RUN, version, encodeAdapter(config, { lora, weights: initLoraWeights(config, lora, { seed: version, bStd: 0.5 }) }));
}

const observation = {} as SqlObservation;
const request = (turn: number) => ({ promptIds: [5, 6, 7, 8, 9, 10], maxNewTokens: 3, seed: 11, turn, observation });

describe('adapters per version on serve-model', () => {
  it('loads each version by name, unloads old ones, keeps at most the bound, re-primes a restarted server', async () => {
    const pool = new InferencePool({ urls: [server.url], retries: 4, backoffMs: 200 });
    const adapters = new AdapterManager(pool, { baseModel: 'tiny', runId: RUN, sharePath: share, maxLoaded: 2 });
    const source = new RemoteCompletionSource({ pool, adapters, sampling: { temperature: 1, topP: 1, topK: 0 }, stopIds: [] });
    const target = pool.servers[0] as InferenceServer;
    const episode = source.episode({ episodeId: 'e1', questionId: 'q', dbId: 'd', seed: 1 });

    // Version 0 without a starting adapter: the base model, nothing loaded.
    expect((await episode.complete(request(0))).policyVersion).toBe(0);
    expect(await served(server.url)).toEqual(['tiny']);

    publish(1);
    // Another worker of the run loaded v1 already: the server's 400 "already been loaded" is fine.
    const other = await fetch(`${server.url}/v1/load_lora_adapter`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ lora_name: `${RUN}-v1`, lora_path: adapters.adapterPath(1) }) });
    expect(other.status).toBe(200);
    source.setVersion(1, true);
    const first = await episode.complete(request(1));
    expect(first.policyVersion).toBe(1);
    expect(await served(server.url)).toEqual(['tiny', `${RUN}-v1`]);

    // A turn still sampling with v1 (held here) while v2 arrives: both stay loaded until it ends.
    await adapters.use(target, 1);
    publish(2);
    source.setVersion(2, true);
    const second = await episode.complete(request(2));
    expect(second.policyVersion).toBe(2);
    // Another adapter samples differently from the same prompt and seed.
    expect(second.tokens).not.toEqual(first.tokens);
    expect(adapters.loadedOn(target)).toEqual([1, 2]);
    adapters.done(target, 1);
    await adapters.settled();
    expect(adapters.loadedOn(target)).toEqual([2]);
    expect(await served(server.url)).toEqual(['tiny', `${RUN}-v2`]);

    publish(3);
    source.setVersion(3, true);
    const third = await episode.complete(request(3));
    await adapters.settled();
    expect(await served(server.url)).toEqual(['tiny', `${RUN}-v3`]);

    // The server restarts (its adapters are gone); the next turn re-primes it and samples the same.
    const port = server.port;
    await server.stop();
    server = await startServeModel([...serveArgs, '--port', String(port)]);
    expect(await served(server.url)).toEqual(['tiny']);
    const again = await episode.complete(request(3));
    expect(again).toEqual(third);
    expect(await served(server.url)).toEqual(['tiny', `${RUN}-v3`]);
    episode.close?.();
    expect(target.episodes).toBe(0);
    expect(sharedAdapterDir(share, RUN, 3)).toBe(join(share, RUN, 'v3'));
  }, 600_000);

  it('sqlenv train samples on the server and publishes every version to the share before sampling it', async () => {
    const trainShare = join(root, 'train-share');
    const runDir = join(root, 'run');
    const before = await served(server.url);
    const loadsBefore = await answeredRequests(server.url, '/v1/load_lora_adapter');
    const result = await runSqlenv(
      ['train', '--policy', 'model', '--model', modelDir, '--lora-rank', '2', '--lora-alpha', '4', '--episodes', '12', '--group-size', '4', '--groups-per-batch', '1', '--max-new-tokens', '8', '--concurrency', '4',
        '--drop-zero-variance', 'false', '--inference-url', server.url, '--adapter-share', trainShare, '--run-dir', runDir, '--json', '--progress', 'off'],
      { SQLENV_CACHE_DIR: join(root, 'cache') },
    );
    expect(result.code, result.stderr).toBe(0);
    const summary = JSON.parse(result.stdout.trim().split('\n').at(-1) ?? '{}') as { run_id: string; groups_trained: number; policy_version: number; episodes_failed: number };
    expect(summary).toMatchObject({ groups_trained: 3, policy_version: 3, episodes_failed: 0 });
    for (const version of [1, 2, 3]) expect(existsSync(join(sharedAdapterDir(trainShare, summary.run_id, version), 'adapter_model.safetensors')), `v${version}`).toBe(true);
    // On policy (max_staleness 0): the groups after the first were sampled with v1 and v2, loaded by name.
    expect((await answeredRequests(server.url, '/v1/load_lora_adapter')) - loadsBefore).toBe(2);
    const versions = readFileSync(join(runDir, 'metrics.jsonl'), 'utf8').trim().split('\n').map((line) => (JSON.parse(line) as { version: number }).version);
    expect(versions).toEqual([1, 2, 3]);
    // The run's workers left: their adapters are unloaded again.
    expect(await served(server.url)).toEqual(before);
  }, 600_000);
});
