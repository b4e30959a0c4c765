/**
 * One model's side of bench/gpu.bench.ts, in its own process: creates the generation session once on
 * the execution provider asked for, then for each case
 *   - `generate`: one turn of `newTokens` (T = 1, no stop token) and the same batch's prefill alone
 *     (one new token), so decode tokens/s = rows × (new − 1) ÷ (turn − prefill);
 *   - `turns`: the cache question of a provider without IO binding. Turn 1 decodes `newTokens` and keeps
 *     its cache; turn 2 appends `appendTokens` to every row and decodes again, once fed against the kept
 *     cache (the cache crosses host → device as feeds and back as outputs) and once re-prefilled from
 *     scratch (the whole context as the prompt, nothing crosses). Both turns give the same tokens.
 * Run: node --expose-gc --import tsx bench/gpu-probe.ts '<json>' (fields of ProbeArgs). Prints one JSON line.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Generator, kvBytesPerToken, loadModel, uniformsForSeed, type RowInput, type RowKvCache } from '@sqlenv/model';
import { bestWallMs } from './lib/harness.ts';

/** One case of a probe; bench/gpu.bench.ts builds the lists (a type-only import: nothing of this file runs there). */
export interface ProbeCase {
  kind: 'generate' | 'turns';
  batch: number;
  promptTokens: number;
  newTokens: number;
  /** `turns`: tokens appended to each row before the second turn. */
  appendTokens?: number;
}
interface ProbeArgs {
  dir: string;
  provider: 'cpu' | 'cuda' | 'webgpu';
  threads: number;
  /** Timed runs after one warm-up (0: one run, timed). */
  repeats: number;
  cases: ProbeCase[];
}

const args = JSON.parse(process.argv[2] ?? '') as ProbeArgs;
const t0 = performance.now();
const { config, weights } = loadModel(args.dir);
const fileDir = mkdtempSync(join(tmpdir(), 'sqlenv-gpu-probe-'));
const generator = await Generator.create(config, weights, {
  modelFile: join(fileDir, 'generation.onnx'),
  releaseWeights: true,
  session: { provider: args.provider, intraOpThreads: args.threads },
});
rmSync(fileDir, { recursive: true, force: true });
const loadMs = performance.now() - t0;
const record = generator.sessionRecord;
process.stderr.write(`session created in ${Math.round(loadMs)} ms: ${JSON.stringify(record)}\n`);
// Every step is also a stdout line of its own: a probe stopped at its time limit still reports what it measured.
process.stdout.write(`${JSON.stringify({ step: 'session', loadMs: Math.round(loadMs), session: record })}\n`);

const promptIds = (b: number, length: number, salt = 0): number[] => Array.from({ length }, (_, t) => (t * 7919 + b * 104_729 + salt) % config.vocabSize);
/** Best wall time of `repeats` runs after a warm-up; with `repeats` 0, one run, timed. */
const timed = (run: () => Promise<void>): Promise<number> => (args.repeats === 0 ? bestWallMs(run, 1) : bestWallMs(run, args.repeats, 1));

const results: Record<string, unknown>[] = [];
for (const c of args.cases) {
  const { batch, promptTokens, newTokens } = c;
  const caseStart = performance.now();
  if (c.kind === 'generate') {
    const requests = Array.from({ length: batch }, (_, b) => ({ promptIds: promptIds(b, promptTokens), seed: b, temperature: 1 }));
    const turn = async (n: number): Promise<void> => {
      const out = await generator.generate(requests, { maxNewTokens: n, stopIds: [] });
      if (out.some((r) => r.tokens.length !== n)) throw new Error(`expected ${n} tokens per row`);
    };
    const turnMs = await timed(() => turn(newTokens));
    const prefillMs = await timed(() => turn(1));
    const decodeMs = Math.max(turnMs - prefillMs, 1e-3);
    results.push({
      ...c,
      turnMs: Math.round(turnMs),
      prefillMs: Math.round(prefillMs),
      tokensPerS: Number(((batch * newTokens) / (turnMs / 1000)).toFixed(1)),
      prefillTokensPerS: Math.round((batch * promptTokens) / (prefillMs / 1000)),
      decodeTokensPerS: Number(((batch * (newTokens - 1)) / (decodeMs / 1000)).toFixed(1)),
      caseMs: Math.round(performance.now() - caseStart),
    });
  } else {
    const append = c.appendTokens ?? 100;
    // Turn 1 keeps the cache; every row's uniforms come from its seed, turn 2 continues the stream.
    const uniforms = (b: number): Float32Array => uniformsForSeed(b, 2 * newTokens);
    const first = await generator.runRows(
      Array.from({ length: batch }, (_, b) => ({ inputIds: promptIds(b, promptTokens), uniforms: uniforms(b).subarray(0, newTokens), temperature: 1 })),
      { steps: newTokens, keepCache: true, stopIds: [] },
    );
    // The second turn's new tokens: the last sampled token (not yet in the cache) and the appended ones.
    const appended = (b: number): number[] => [...(first[b]?.tokens.slice(-1) ?? []), ...promptIds(b, append, 17)];
    const caches = first.map((r) => r.cache as RowKvCache);
    const fullContext = (b: number): number[] => [...promptIds(b, promptTokens), ...(first[b]?.tokens.slice(0, -1) ?? []), ...appended(b)];
    /** Turn 2 with each row's second-turn uniforms, the rest of the row as `row` gives it. */
    const secondTurn = async (row: (b: number) => Pick<RowInput, 'inputIds' | 'cache'>): Promise<number[][]> =>
      (
        await generator.runRows(
          Array.from({ length: batch }, (_, b) => ({ ...row(b), uniforms: uniforms(b).subarray(newTokens), temperature: 1 })),
          { steps: newTokens, keepCache: false, stopIds: [] },
        )
      ).map((r) => r.tokens);
    const reused = (): Promise<number[][]> => secondTurn((b) => ({ inputIds: appended(b), cache: caches[b] as RowKvCache }));
    const reprefilled = (): Promise<number[][]> => secondTurn((b) => ({ inputIds: fullContext(b) }));
    let reusedTokens: number[][] = [];
    let reprefilledTokens: number[][] = [];
    const reusedMs = await timed(async () => {
      reusedTokens = await reused();
    });
    const reprefilledMs = await timed(async () => {
      reprefilledTokens = await reprefilled();
    });
    const cachedSlots = caches[0]?.length ?? 0;
    results.push({
      ...c,
      appendTokens: append,
      cachedSlotsPerRow: cachedSlots,
      cacheBytes: batch * cachedSlots * kvBytesPerToken(config),
      reusedMs: Math.round(reusedMs),
      reprefilledMs: Math.round(reprefilledMs),
      reuseSpeedup: Number((reprefilledMs / reusedMs).toFixed(2)),
      sameTokens: reusedTokens.filter((t, b) => JSON.stringify(t) === JSON.stringify(reprefilledTokens[b])).length,
      caseMs: Math.round(performance.now() - caseStart),
    });
  }
  process.stderr.write(`${JSON.stringify(results.at(-1))}\n`);
  process.stdout.write(`${JSON.stringify({ step: 'case', case: results.at(-1) })}\n`);
}
await generator.close();
process.stdout.write(
  `${JSON.stringify({ side: 'sqlenv', provider: args.provider, threads: args.threads, loadMs: Math.round(loadMs), session: record, cases: results, maxRssBytes: process.resourceUsage().maxRSS * 1024 })}\n`,
);
