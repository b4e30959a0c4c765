/**
 * How many ONNX Runtime intra-op threads the inference engine should take when the episodes' SQL
 * executor children share the same cores: `sqlenv eval --policy model` on models/sqlenv-tiny
 * (sampled, T 1) at 8 and 32 episodes in flight, with --threads 1 and every core, each in its own
 * process, the configurations interleaved round by round. Writes bench/results/threads.md and .json.
 *
 *   npm run bench:threads                          # 64 train-split episodes, 2 rounds
 *   npm run bench:threads -- --episodes 128 --rounds 3
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const args = process.argv.slice(2);
const arg = (name: string, fallback: number): number => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const episodes = arg('--episodes', 64);
const rounds = arg('--rounds', 2);
const root = fileURLToPath(new URL('..', import.meta.url));
const bin = join(root, 'apps', 'cli', 'bin', 'sqlenv.js');
const cores = availableParallelism();
const threadCounts = [...new Set([1, cores])];
const configs = [8, 32].flatMap((concurrency) => threadCounts.map((threads) => ({ concurrency, threads })));

interface Sample {
  seconds: number;
  meanBatch: number;
}
const loadAverageAtStart = loadavg()[0] as number;
const samples = new Map<string, Sample[]>();
for (let r = 0; r < rounds; r++) {
  for (const c of configs) {
    const started = performance.now();
    const out = execFileSync(
      process.execPath,
      [bin, 'eval', '--policy', 'model', '--model', join(root, 'models', 'sqlenv-tiny'), '--split', 'train', '--episodes', String(episodes), '--temperature', '1', '--concurrency', String(c.concurrency), '--threads', String(c.threads), '--json'],
      { cwd: root, encoding: 'utf8', maxBuffer: 64 << 20, env: { ...process.env, LOG_LEVEL: 'warn' } },
    );
    const seconds = (performance.now() - started) / 1000;
    const summary = JSON.parse(out.trim().split('\n').at(-1) as string) as { mean_batch_size: number };
    const key = `${c.concurrency}/${c.threads}`;
    samples.set(key, [...(samples.get(key) ?? []), { seconds, meanBatch: summary.mean_batch_size }]);
    console.log(`round ${r + 1}: concurrency ${c.concurrency}, threads ${c.threads}: ${seconds.toFixed(1)} s, ${(episodes / seconds).toFixed(2)} episodes/s, mean batch ${summary.mean_batch_size}`);
  }
}
const rows = configs.map((c) => {
  const s = samples.get(`${c.concurrency}/${c.threads}`) as Sample[];
  const best = Math.min(...s.map((x) => x.seconds));
  const mean = s.reduce((n, x) => n + x.seconds, 0) / s.length;
  return { ...c, episodesPerS: Math.round((episodes / mean) * 100) / 100, bestEpisodesPerS: Math.round((episodes / best) * 100) / 100, meanBatch: s[0]?.meanBatch ?? 0 };
});
const machine = { cpu: cpus()[0]?.model ?? 'unknown', cores, node: process.version, loadAverageAtStart: Math.round(loadAverageAtStart * 100) / 100 };
const result = { date: new Date().toISOString().slice(0, 10), machine, episodes, rounds, rows };
const dir = join(root, 'bench', 'results');
if (!existsSync(dir)) mkdirSync(dir, { recursive: true });
writeFileSync(join(dir, 'threads.json'), `${JSON.stringify(result, null, 2)}\n`);
const md = [
  '# Engine threads beside the SQL executor',
  '',
  `${result.date} · ${machine.cpu} · ${cores} cores (shared; 1-min load average ${machine.loadAverageAtStart} at start) · Node ${machine.node}`,
  '',
  `\`sqlenv eval --policy model --model models/sqlenv-tiny --split train --episodes ${episodes} --temperature 1\` (process start, model load and the episodes; wall time), ${rounds} rounds with the configurations interleaved. Episodes/s: mean over the rounds (best round in brackets).`,
  '',
  '| episodes in flight | --threads | episodes/s | mean batch |',
  '|---:|---:|---:|---:|',
  ...rows.map((r) => `| ${r.concurrency} | ${r.threads} | ${r.episodesPerS} (${r.bestEpisodesPerS}) | ${r.meanBatch} |`),
  '',
];
writeFileSync(join(dir, 'threads.md'), md.join('\n'));
console.log(md.join('\n'));
