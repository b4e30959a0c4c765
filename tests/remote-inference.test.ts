import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TrajectorySchema, type Trajectory } from '@sqlenv/protocol';
import { runSqlenv, startServeModel, type ServeModelProcess } from './serve-model-processes.ts';

/**
 * The remote completion source against real `sqlenv serve-model` processes over HTTP: the same
 * episodes as the in-process engine, and every start-up refusal with its reason (exit 2).
 */
const root = mkdtempSync(join(tmpdir(), 'sqlenv-remote-'));
const modelDir = join(root, 'tiny-qwen3');
const cacheDir = join(root, 'cache');
const API_KEY = 'remote-key';
const env = { SQLENV_CACHE_DIR: cacheDir };
let server: ServeModelProcess;

beforeAll(async () => {
  const init = await runSqlenv(['model', 'init', '--config', 'tiny-qwen3', '--out', modelDir, '--seed', '2'], env);
  expect(init.code, init.stderr).toBe(0);
  server = await startServeModel(['--model', modelDir, '--port', '0', '--threads', '1', '--max-batch-size', '4', '--served-model-name', 'tiny'], { SQLENV_INFERENCE_API_KEY: API_KEY });
}, 300_000);

afterAll(async () => {
  await server?.stop();
  rmSync(root, { recursive: true, force: true });
});

/** A port nobody listens on (bound once, then closed). */
async function closedPort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

function trajectories(file: string): Trajectory[] {
  return readFileSync(file, 'utf8').trim().split('\n').map((line) => TrajectorySchema.parse(JSON.parse(line)));
}

const evalArgs = ['eval', '--policy', 'model', '--model', modelDir, '--episodes', '3', '--seed', '4', '--temperature', '1', '--max-new-tokens', '12', '--concurrency', '1', '--json'];

describe('sqlenv eval --inference-url (serve-model)', () => {
  it('plays the same episodes as the in-process engine: identical tokens, log-probs within 1e-4', async () => {
    const local = join(root, 'local.jsonl');
    const remote = join(root, 'remote.jsonl');
    const [a, b] = [await runSqlenv([...evalArgs, '--trajectories', local], env), await runSqlenv([...evalArgs, '--trajectories', remote, '--inference-url', server.url], { ...env, SQLENV_INFERENCE_API_KEY: API_KEY })];
    expect(a.code, a.stderr).toBe(0);
    expect(b.code, b.stderr).toBe(0);
    const [mine, theirs] = [trajectories(local), trajectories(remote)];
    expect(theirs).toHaveLength(3);
    let maxDiff = 0;
    let tokens = 0;
    for (const [i, t] of theirs.entries()) {
      const l = mine[i] as Trajectory;
      expect(t.turns.map((turn) => [...turn.prompt_ids, ...turn.completion_ids])).toEqual(l.turns.map((turn) => [...turn.prompt_ids, ...turn.completion_ids]));
      expect(t.outcome).toEqual(l.outcome);
      for (const [k, turn] of t.turns.entries()) {
        const lp = (l.turns[k] as Trajectory['turns'][number]).logprobs;
        for (const [j, p] of turn.logprobs.entries()) maxDiff = Math.max(maxDiff, Math.abs(p - (lp[j] as number)));
        tokens += turn.completion_ids.length;
      }
    }
    expect(tokens).toBeGreaterThan(20);
    expect(maxDiff).toBeLessThanOrEqual(1e-4);
  }, 600_000);
});

describe('remote start-up refusals (exit 2, with the reason)', () => {
  const remote = (extra: string[], key = API_KEY) => runSqlenv([...evalArgs.slice(0, 5), '--episodes', '1', ...extra], { ...env, SQLENV_INFERENCE_API_KEY: key });

  it('a server that is down', async () => {
    const closed = await closedPort();
    const down = await remote(['--inference-url', `${server.url},http://127.0.0.1:${closed}`]);
    expect(down.code, down.stderr).toBe(2);
    expect(down.stderr).toContain(`inference server http://127.0.0.1:${closed} does not answer`);
    expect(down.stderr).toContain('ECONNREFUSED');
  }, 120_000);

  it('a wrong API key', async () => {
    const wrong = await remote(['--inference-url', server.url], 'not-the-key');
    expect(wrong.code, wrong.stderr).toBe(2);
    expect(wrong.stderr).toMatch(/refused the API key \(HTTP 401\)/);
  }, 120_000);

  it('a model the servers do not serve', async () => {
    const unknown = await remote(['--inference-url', server.url, '--inference-model', 'nope']);
    expect(unknown.code, unknown.stderr).toBe(2);
    expect(unknown.stderr).toContain(`${server.url} does not serve the model nope (it serves: tiny)`);
  }, 120_000);

  it('top-p < 1 or top-k with a remote source', async () => {
    for (const flags of [['--top-p', '0.9'], ['--top-k', '5']]) {
      const refused = await remote(['--inference-url', server.url, ...flags]);
      expect(refused.code, refused.stderr).toBe(2);
      expect(refused.stderr).toMatch(/refused: top-[pk] .* full vocabulary only with top-p 1 and top-k off/);
    }
  }, 120_000);

  it('training remotely without an adapter share, or with one that is not writable', async () => {
    const train = ['train', '--policy', 'model', '--model', modelDir, '--episodes', '4', '--inference-url', server.url];
    const noShare = await runSqlenv(train, { ...env, SQLENV_INFERENCE_API_KEY: API_KEY });
    expect(noShare.code, noShare.stderr).toBe(2);
    expect(noShare.stderr).toContain('needs --adapter-share DIR');
    const file = join(root, 'a-file');
    writeFileSync(file, '');
    const locked = join(root, 'locked');
    mkdirSync(locked);
    chmodSync(locked, 0o500);
    for (const share of [join(file, 'share'), ...(process.getuid?.() === 0 ? [] : [locked])]) {
      const notWritable = await runSqlenv([...train, '--adapter-share', share], { ...env, SQLENV_INFERENCE_API_KEY: API_KEY });
      expect(notWritable.code, notWritable.stderr).toBe(2);
      expect(notWritable.stderr).toContain(`the adapter share ${share} (--adapter-share, SQLENV_ADAPTER_SHARE) is not writable`);
    }
  }, 240_000);
});
