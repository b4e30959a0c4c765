/**
 * Our side of bench/generate-hf.bench.ts: one case in its own process (so its peak RSS is its own),
 * started by the bench through the harness's `runChild` with the fields of bench/python/hf_generate.py
 * plus `prefillChunkTokens` (a number, or null for the whole prompt at once: the graph without
 * chunking); answers with the harness's result line.
 *
 * The session is built the way the inference engine builds a big model's (`loadViaFile` and
 * `disablePrepacking`): ORT loads the model from a file with the float32 arrays released first and
 * keeps one copy of each weight.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Generator, loadModel } from '@sqlenv/model';
import { childPayload, replyToParent } from './lib/harness.ts';

interface ProbeArgs {
  dir: string;
  batch: number;
  promptTokens: number;
  newTokens: number;
  threads: number;
  repeats: number;
  prefillChunkTokens: number | null;
}

/** Resident bytes now: all, anonymous (heaps) and file-backed (mapped files). */
const rss = (): { rssBytes: number; rssAnonBytes: number; rssFileBytes: number } => {
  const status = readFileSync('/proc/self/status', 'utf8');
  const kb = (field: string): number => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? 0) * 1024;
  return { rssBytes: kb('VmRSS'), rssAnonBytes: kb('RssAnon'), rssFileBytes: kb('RssFile') };
};

const payload = childPayload();
if (payload === undefined) throw new Error('bench/generate-hf-probe.ts is a child of bench/generate-hf.bench.ts: run npm run bench:generate-hf');
const args = payload as ProbeArgs;
const t0 = performance.now();
const { config, weights } = loadModel(args.dir);
const fileDir = mkdtempSync(join(tmpdir(), 'sqlenv-generate-hf-'));
const generator = await Generator.create(config, weights, {
  prefillChunkTokens: args.prefillChunkTokens ?? Infinity,
  modelFile: join(fileDir, 'generation.onnx'),
  releaseWeights: true,
  session: { intraOpThreads: args.threads, sessionConfig: { 'session.disable_prepacking': '1' } },
});
rmSync(fileDir, { recursive: true, force: true });
// Generator.create has collected the released float32 arrays (releaseWeights); this collects the rest of loading.
(globalThis as { gc?: () => void }).gc?.();
const loadMs = performance.now() - t0;
const loaded = rss();

const { batch, promptTokens, newTokens } = args;
const requests = Array.from({ length: batch }, (_, b) => ({
  promptIds: Array.from({ length: promptTokens }, (_, t) => (t * 7919 + b * 104_729) % config.vocabSize),
  seed: b,
  temperature: 1,
}));
const run = async (): Promise<number> => {
  const start = performance.now();
  const results = await generator.generate(requests, { maxNewTokens: newTokens, stopIds: [] });
  const elapsed = performance.now() - start;
  if (results.some((r) => r.tokens.length !== newTokens)) throw new Error(`expected ${newTokens} tokens per row`);
  return elapsed;
};
const times: number[] = [];
if (args.repeats === 0) times.push(await run());
else {
  await run(); // warm-up: first-run allocations
  for (let i = 0; i < args.repeats; i++) times.push(await run());
}
const afterGenerate = rss();
await generator.close();
const best = Math.min(...times);
replyToParent({
    side: 'sqlenv',
    prefillChunkTokens: args.prefillChunkTokens,
    threads: args.threads,
    loadMs: Math.round(loadMs),
    generateMs: Math.round(best),
    tokensPerS: Number(((batch * newTokens) / (best / 1000)).toFixed(1)),
    loadedRssBytes: loaded.rssBytes,
    loaded,
    afterGenerate,
  maxRssBytes: process.resourceUsage().maxRSS * 1024,
});
