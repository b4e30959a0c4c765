/**
 * What one decode chunk of the generation graph costs per batch size and thread count: the shape the
 * inference engine runs most (every row continues its cache by 16 steps). Answers whether a small
 * model's step costs about the same at any batch (per-step overhead) or grows with it (per-row work),
 * and what ORT's intra-op threads buy at each batch: the basis of the engine's replica plan
 * (docs/inference.md, "Replicas").
 *
 *   npm run bench:decode-chunk                                   # models/sqlenv-base, LoRA rank 16, 1 and 2 threads
 *   npm run bench:decode-chunk -- --model models/sqlenv-tiny --context 600 --threads 1,2,4
 *
 * Each (batch, threads) case: B rows of `--context` tokens are prefilled once (cache kept), then the
 * chunk of 16 steps is run `--repeats` times, each continuing the previous one's caches (the
 * engine's uncopied case); the best time counts. Writes <results dir>/decode-chunk.{md,json}.
 *
 *   BENCH_RESULTS_DIR=/tmp/r npm run bench:decode-chunk -- --model models/sqlenv-tiny --threads 1 --batches 1 --repeats 1   # smallest
 */
import { loadModel, loraConfigSchema, Generator, uniformsForSeed, type RowKvCache } from '@sqlenv/model';
import { numberArg, startBench, stringArg } from './lib/harness.ts';

const modelDir = stringArg('--model') ?? 'models/sqlenv-base';
const context = numberArg('--context', 300);
const steps = numberArg('--steps', 16);
const repeats = numberArg('--repeats', 6);
const threadsList = (stringArg('--threads') ?? '1,2').split(',').map(Number);
const batches = (stringArg('--batches') ?? '1,4,8,16,32,64').split(',').map(Number);
const bench = startBench('decode-chunk');

interface Case {
  batch: number;
  threads: number;
  chunkMs: number;
  stepMs: number;
  rowStepUs: number;
}

const cases: Case[] = [];
for (const threads of threadsList) {
  const { config, weights } = loadModel(modelDir);
  const generator = await Generator.create(config, weights, { lora: loraConfigSchema.parse({ rank: 16, alpha: 32 }), session: { mode: 'direct', intraOpThreads: threads } });
  try {
    for (const batch of batches) {
      const prompts = Array.from({ length: batch }, (_, b) => Array.from({ length: context }, (_, i) => 300 + ((i * 7 + b * 13) % 1500)));
      // No stop id can be sampled: every row runs every step.
      const noStop = { stopIds: [-5] };
      const prefilled = await generator.runRows(prompts.map((p, b) => ({ inputIds: p, uniforms: uniformsForSeed(b, 1) })), { steps: 1, keepCache: true, ...noStop });
      let caches = prefilled.map((r) => r.cache as RowKvCache);
      let last = prefilled.map((r) => r.tokens.at(-1) as number);
      let best = Number.POSITIVE_INFINITY;
      for (let rep = 0; rep < repeats; rep++) {
        const started = performance.now();
        const out = await generator.runRows(
          last.map((token, b) => ({ inputIds: [token], cache: caches[b] as RowKvCache, uniforms: uniformsForSeed(1000 * rep + b, steps) })),
          { steps, keepCache: true, ...noStop },
        );
        best = Math.min(best, performance.now() - started);
        caches = out.map((r) => r.cache as RowKvCache);
        last = out.map((r) => r.tokens.at(-1) as number);
      }
      const row: Case = { batch, threads, chunkMs: Math.round(best * 10) / 10, stepMs: Math.round((best / steps) * 100) / 100, rowStepUs: Math.round((best / steps / batch) * 1000) };
      cases.push(row);
      console.log(JSON.stringify(row));
    }
  } finally {
    await generator.close();
  }
}

const at = (batch: number, threads: number): Case | undefined => cases.find((c) => c.batch === batch && c.threads === threads);
const lines = [
  `${modelDir}, LoRA rank 16 (zero adapter), ${context}-token caches, chunks of ${steps} steps continuing the previous chunk's caches, best of ${repeats}.`,
  '',
  `| rows | ${threadsList.map((t) => `${t} thread${t === 1 ? '' : 's'}: chunk ms / µs per row-step`).join(' | ')} |`,
  `| ---: | ${threadsList.map(() => '---:').join(' | ')} |`,
  ...batches.map((b) => `| ${b} | ${threadsList.map((t) => { const c = at(b, t); return c === undefined ? '–' : `${c.chunkMs} / ${c.rowStepUs}`; }).join(' | ')} |`),
  '',
  '- *µs per row-step*: the chunk\'s time ÷ (steps × rows). Flat in the rows: the step costs in proportion to the batch (per-row work);',
  '  falling: a fixed cost per step spread over more rows.',
  '',
];
bench.write({ title: 'Decode chunk cost by batch size and threads', body: lines, data: { modelDir, context, steps, repeats, cases } });
