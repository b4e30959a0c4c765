import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answeredRequests, runSqlenv, startServeModel, type ServeModelProcess } from './serve-model-processes.ts';

/**
 * Two real `sqlenv serve-model` processes behind one `sqlenv eval --inference-url A,B`: episodes
 * spread over both, and when A dies mid-run its episodes move to B and every episode still ends.
 */
const root = mkdtempSync(join(tmpdir(), 'sqlenv-remote-failover-'));
const modelDir = join(root, 'tiny-qwen3');
const serveArgs = ['--model', modelDir, '--port', '0', '--threads', '1', '--max-batch-size', '4', '--served-model-name', 'tiny', '--max-loras', '0'];
let a: ServeModelProcess;
let b: ServeModelProcess;

beforeAll(async () => {
  const init = await runSqlenv(['model', 'init', '--config', 'tiny-qwen3', '--out', modelDir, '--seed', '2']);
  expect(init.code, init.stderr).toBe(0);
  [a, b] = await Promise.all([startServeModel(serveArgs), startServeModel(serveArgs)]);
}, 300_000);

afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  rmSync(root, { recursive: true, force: true });
});

describe('failover between serve-model processes', () => {
  it('moves the episodes of a server that dies to the other one; every episode ends', async () => {
    const args = ['eval', '--policy', 'model', '--model', modelDir, '--episodes', '12', '--seed', '1', '--temperature', '1', '--max-new-tokens', '24', '--concurrency', '4', '--json', '--inference-url', `${a.url},${b.url}`];
    const evaluated = runSqlenv(args, { SQLENV_CACHE_DIR: join(root, 'cache') }, 400_000);
    let done = false;
    void evaluated.then(() => (done = true));
    // Both serve episodes (least loaded first); A dies once it has answered a few turns.
    while ((await answeredRequests(a.url, '/v1/completions')) < 3 && !done) await new Promise((r) => setTimeout(r, 20));
    expect(done, 'the evaluation ended before server A answered 3 turns').toBe(false);
    const bBefore = await answeredRequests(b.url, '/v1/completions');
    expect(bBefore).toBeGreaterThan(0);
    await a.stop();
    const result = await evaluated;
    expect(result.code, result.stderr).toBe(0);
    const summary = JSON.parse(result.stdout.trim().split('\n').at(-1) ?? '{}') as { episodes: number; errors: number };
    expect(summary).toMatchObject({ episodes: 12, errors: 0 });
    expect(await answeredRequests(b.url, '/v1/completions')).toBeGreaterThan(bBefore);
  }, 600_000);
});
