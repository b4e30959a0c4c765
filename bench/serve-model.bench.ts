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
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { countParameters, InferenceEngine, readModelConfig, replicaPlan, type EngineStats } from '@sqlenv/model';
import { CompletionRequestSchema, CompletionResponseSchema } from '@sqlenv/protocol';
import { describeMachine, machineLine, median, numberArg, repoRoot, stringArg, today, writeResultFiles } from './lib/cli-bench.ts';

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

async function startServer(): Promise<{ child: ChildProcess; url: string; model: string }> {
  const bin = join(repoRoot, 'apps', 'cli', 'bin', 'sqlenv.js');
  const args = [bin, 'serve-model', '--model', modelDir, '--port', '0', '--threads', String(threads), '--max-batch-size', String(maxBatchSize), '--max-loras', '0'];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise<string>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`serve-model exited with ${code}`)));
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (line) => {
      const entry = JSON.parse(line) as { msg?: string; url?: string };
      if (entry.msg === 'model server listening' && entry.url !== undefined) resolve(entry.url);
    });
  });
  const models = (await (await fetch(`${url}/v1/models`)).json()) as { data: { id: string }[] };
  return { child, url, model: models.data[0]?.id ?? '' };
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

async function engineStats(url: string): Promise<Partial<EngineStats>> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return Object.fromEntries([...text.matchAll(/^sqlenv_model_server_engine_stat\{stat="(\w+)"\} (\S+)$/gm)].map((m) => [m[1], Number(m[2])]));
}

const machine = describeMachine();
// The replicas and threads serve-model gives the same flags.
const plan = replicaPlan({ provider: 'cpu', threads, maxBatchSize, weightBytes: 4 * countParameters(readModelConfig(modelDir)) });
const engine = await InferenceEngine.start({ modelDir, maxBatchSize, ...plan });
const server = await startServer();
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
const stats = { inProcess: engine.stats, http: await engineStats(server.url) };
server.child.kill('SIGTERM');
const ratio = median(rows.map((r) => r.ratio));
const settings = { modelDir: modelDir.replace(repoRoot, ''), episodes, inFlight, turns, maxTokens, pairs, threads, maxBatchSize };
writeResultFiles('serve-model', { date: today(), machine, settings, rows, medianRatio: ratio, stats }, [
  '# bench:serve-model',
  '',
  machineLine(today(), machine),
  '',
  `Settings: ${JSON.stringify(settings)}. Ratio = in-process episodes/s ÷ HTTP episodes/s (target ≤ 1.25).`,
  '',
  '| pair | in process (episodes/s) | serve-model over HTTP (episodes/s) | ratio |',
  '| --- | --- | --- | --- |',
  ...rows.map((r) => `| ${r.pair} | ${r.inProcessEpisodesPerS.toFixed(2)} | ${r.httpEpisodesPerS.toFixed(2)} | ${r.ratio.toFixed(2)} |`),
  '',
  `Median ratio: ${ratio.toFixed(2)}. Mean decode batch: in process ${stats.inProcess.meanBatchSize.toFixed(1)}, HTTP ${(stats.http.meanBatchSize ?? 0).toFixed(1)}; prefill tokens (all runs): in process ${stats.inProcess.prefillTokens}, HTTP ${stats.http.prefillTokens ?? 0}.`,
]);
process.stdout.write(`median ratio ${ratio.toFixed(2)}\n`);
