/**
 * How many ONNX Runtime intra-op threads the inference engine should take when the episodes' SQL
 * executor children share the same cores: `sqlenv eval --policy model` on models/sqlenv-tiny
 * (sampled, T 1) at 8 and 32 episodes in flight, with --threads 1 and every core, each in its own
 * process, the configurations interleaved round by round. Writes <results dir>/threads.md and .json.
 *
 *   npm run bench:threads                          # 64 train-split episodes, 2 rounds
 *   npm run bench:threads -- --episodes 128 --rounds 3
 *   BENCH_RESULTS_DIR=/tmp/r npm run bench:threads -- --episodes 8 --rounds 1   # smallest
 */
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { interleavedRounds, numberArg, repoRoot, resultsByVariant, runSqlenv, startBench } from './lib/harness.ts';

const episodes = numberArg('--episodes', 64);
const rounds = numberArg('--rounds', 2);
const cores = availableParallelism();
const threadCounts = [...new Set([1, cores])];
const configs = [8, 32].flatMap((concurrency) => threadCounts.map((threads) => ({ concurrency, threads })));

interface Sample {
  seconds: number;
  meanBatch: number;
}
const bench = startBench('threads');
const runs = await interleavedRounds(configs, rounds, (c, r) => {
  const started = performance.now();
  const out = runSqlenv(['eval', '--policy', 'model', '--model', join(repoRoot, 'models', 'sqlenv-tiny'), '--split', 'train', '--episodes', String(episodes), '--temperature', '1', '--concurrency', String(c.concurrency), '--threads', String(c.threads), '--json']);
  const seconds = (performance.now() - started) / 1000;
  const summary = JSON.parse(out.trim().split('\n').at(-1) as string) as { mean_batch_size: number };
  console.log(`round ${r + 1}: concurrency ${c.concurrency}, threads ${c.threads}: ${seconds.toFixed(1)} s, ${(episodes / seconds).toFixed(2)} episodes/s, mean batch ${summary.mean_batch_size}`);
  return { seconds, meanBatch: summary.mean_batch_size } satisfies Sample;
});
const samples = resultsByVariant(runs);
const rows = configs.map((c) => {
  const s = samples.get(c) as Sample[];
  const best = Math.min(...s.map((x) => x.seconds));
  const mean = s.reduce((n, x) => n + x.seconds, 0) / s.length;
  return { ...c, episodesPerS: Math.round((episodes / mean) * 100) / 100, bestEpisodesPerS: Math.round((episodes / best) * 100) / 100, meanBatch: s[0]?.meanBatch ?? 0 };
});
const md = [
  `\`sqlenv eval --policy model --model models/sqlenv-tiny --split train --episodes ${episodes} --temperature 1\` (process start, model load and the episodes; wall time), ${rounds} rounds with the configurations interleaved. Episodes/s: mean over the rounds (best round in brackets).`,
  '',
  '| episodes in flight | --threads | episodes/s | mean batch |',
  '|---:|---:|---:|---:|',
  ...rows.map((r) => `| ${r.concurrency} | ${r.threads} | ${r.episodesPerS} (${r.bestEpisodesPerS}) | ${r.meanBatch} |`),
  '',
];
bench.write({ title: 'Engine threads beside the SQL executor', body: md, data: { episodes, rounds, rows } });
console.log(md.join('\n'));
