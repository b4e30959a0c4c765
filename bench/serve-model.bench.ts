/**
 * bench:serve-model — episodes/s of synthetic multi-turn episodes sampled from the inference engine
 * in this process against the same engine behind `sqlenv serve-model` (a child process), over HTTP
 * with the whole context re-sent every turn, at the same concurrency, threads and batch size. The
 * two are run as alternating pairs (in-process first in even pairs, HTTP first in odd ones) and the
 * median of the pairs' ratios is reported (target: HTTP within 1.25× of in-process at 32 in flight).
 *
 * Episodes: a 300-token first prompt, then 30-token observations, `--turns` turns of `--max-tokens`.
 * Writes bench/results/serve-model.md and .json.
 * Run: npm run bench:serve-model -- [--model DIR] [--episodes 64] [--in-flight 32] [--turns 5] [--max-tokens 24] [--pairs 3] [--threads 2]
 */
import { join } from 'node:path';
import { countParameters, InferenceEngine, readModelConfig, replicaPlan } from '@sqlenv/model';
import { CompletionRequestSchema, CompletionResponseSchema } from '@sqlenv/protocol';
import { median, numberArg, repoRoot, startBench, startServeModel, stringArg } from './lib/harness.ts';

const modelDir = stringArg('--model') ?? join(repoRoot, 'models', 'sqlenv-tiny');
const episodes = numberArg('--episodes', 64);
const inFlight = numberArg('--in-flight', 32);
const turns = numberArg('--turns', 5);
const maxTokens = numberArg('--max-tokens', 24);
const pairs = numberArg('--pairs', 3);
const threads = numberArg('--threads', 2);
const maxBatchSize = 32;

type Sample = (context: number[], seed: number, episode: number) => Promise<number[]>;

function observation(episode: number, turn: number, length: number): number[] {
  return Array.from({ length }, (_, i) => 300 + ((i * 37 + episode * 11 + turn * 5) % 1500));
}

/** Play every episode, `inFlight` at a time; returns episodes/s. */
async function play(sample: Sample): Promise<number> {
  let next = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < episodes) {
        const e = next++;
        const context = observation(e, 0, 300);
        for (let t = 0; t < turns; t++) context.push(...(await sample([...context], e * 100 + t, e)), ...observation(e, t + 1, 30));
      }
    }),
  );
  return episodes / ((performance.now() - start) / 1000);
}

function httpSample(url: string, model: string): Sample {
  return async (context, seed) => {
    // No stop_token_ids: the model's EOS ids, the same stops as the in-process engine's default.
    const body = CompletionRequestSchema.parse({ model, prompt: context, max_tokens: maxTokens, seed, logprobs: 0, return_token_ids: true, skip_special_tokens: false });
    const res = await fetch(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
    return CompletionResponseSchema.parse(await res.json()).choices[0]?.token_ids ?? [];
  };
}

const bench = startBench('serve-model');
// The replicas and threads serve-model gives the same flags.
const plan = replicaPlan({ provider: 'cpu', threads, maxBatchSize, weightBytes: 4 * countParameters(readModelConfig(modelDir)) });
const engine = await InferenceEngine.start({ modelDir, maxBatchSize, ...plan });
const server = await startServeModel(['--model', modelDir, '--threads', String(threads), '--max-batch-size', String(maxBatchSize), '--max-loras', '0']);
const inProcess: Sample = async (context, seed, e) => (await engine.generate({ promptIds: context, maxNewTokens: maxTokens, seed, temperature: 1, cacheKey: `episode-${e}` })).tokens;
const rows: { pair: number; inProcessEpisodesPerS: number; httpEpisodesPerS: number; ratio: number }[] = [];
try {
  await play(inProcess);
  await play(httpSample(server.url, server.model));
  for (let pair = 0; pair < pairs; pair++) {
    const order = pair % 2 === 0 ? (['in', 'http'] as const) : (['http', 'in'] as const);
    const result: Record<string, number> = {};
    for (const side of order) result[side] = await play(side === 'in' ? inProcess : httpSample(server.url, server.model));
    rows.push({ pair, inProcessEpisodesPerS: result['in'] ?? 0, httpEpisodesPerS: result['http'] ?? 0, ratio: (result['in'] ?? 0) / (result['http'] ?? 1) });
  }
} finally {
  await engine.close();
}
const stats = { inProcess: engine.stats, http: await server.engineStats() };
await server.stop();
const ratio = median(rows.map((r) => r.ratio));
const settings = { modelDir: modelDir.replace(repoRoot, ''), episodes, inFlight, turns, maxTokens, pairs, threads, maxBatchSize };
bench.write({ title: 'bench:serve-model', data: { settings, rows, medianRatio: ratio, stats }, body: [
  `Settings: ${JSON.stringify(settings)}. Ratio = in-process episodes/s ÷ HTTP episodes/s (target ≤ 1.25).`,
  '',
  '| pair | in process (episodes/s) | serve-model over HTTP (episodes/s) | ratio |',
  '| --- | --- | --- | --- |',
  ...rows.map((r) => `| ${r.pair} | ${r.inProcessEpisodesPerS.toFixed(2)} | ${r.httpEpisodesPerS.toFixed(2)} | ${r.ratio.toFixed(2)} |`),
  '',
  `Median ratio: ${ratio.toFixed(2)}. Mean decode batch: in process ${stats.inProcess.meanBatchSize.toFixed(1)}, HTTP ${(stats.http.meanBatchSize ?? 0).toFixed(1)}; prefill tokens (all runs): in process ${stats.inProcess.prefillTokens}, HTTP ${stats.http.prefillTokens ?? 0}.`,
] });
process.stdout.write(`median ratio ${ratio.toFixed(2)}\n`);
