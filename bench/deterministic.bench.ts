/**
 * `sqlenv eval --deterministic` against the default engine, side by side in one run: the same
 * evaluation (models/sqlenv-tiny at temperature 1, every dev question of the built-in dataset ×
 * BENCH_SEEDS seeds, BENCH_CONCURRENCY episodes in flight, BENCH_THREADS ORT threads) played
 * BENCH_ROUNDS times by each, alternately (A B B A …). Per engine: wall time and episodes/s; how many
 * episodes' saved transcripts differ from its first round's (and whether the saved file is the same
 * byte for byte apart from created_at); and over the tokens two rounds sampled alike, how many
 * log-probs differ and by how much at most (from --trajectories).
 * Writes <results dir>/<BENCH_RESULTS, default deterministic>.md and .json.
 *
 *   BENCH_THREADS=2 npm run bench:deterministic
 *   BENCH_ROUNDS=1 BENCH_SEEDS=1 BENCH_RESULTS_DIR=/tmp/r npm run bench:deterministic   # smallest
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { benchSettings, interleavedRounds, positiveInt, repoRoot, resultsByVariant, runSqlenvAsync, startBench } from './lib/harness.ts';

const settings = benchSettings(
  z.object({
    BENCH_ROUNDS: positiveInt(3),
    BENCH_SEEDS: positiveInt(3),
    BENCH_CONCURRENCY: positiveInt(48),
    BENCH_THREADS: positiveInt(2),
    BENCH_RESULTS: z.string().min(1).default('deterministic'),
  }),
);

const ENGINES = ['default', 'deterministic'] as const;
type Engine = (typeof ENGINES)[number];

interface Run {
  seconds: number;
  episodes: number;
  meanBatchSize: number;
  /** The saved evaluation, created_at blanked. */
  file: string;
  /** Per episode (question:seed), its transcript as saved. */
  transcripts: Map<string, string>;
  /** Per episode, each turn's completion ids and log-probs. */
  turns: Map<string, Array<{ ids: number[]; logprobs: number[] }>>;
}

const work = mkdtempSync(join(tmpdir(), 'sqlenv-bench-deterministic-'));

async function evaluateOnce(engine: Engine, round: number): Promise<Run> {
  const name = `${engine}-${round}`;
  const trajectories = join(work, `${name}.jsonl`);
  const started = performance.now();
  const stdout = await runSqlenvAsync([
    'eval', '--policy', 'model', '--model', join(repoRoot, 'models', 'sqlenv-tiny'), '--temperature', '1',
    '--split', 'dev', '--episodes', 'all', '--seeds', String(settings.BENCH_SEEDS),
    '--concurrency', String(settings.BENCH_CONCURRENCY), '--threads', String(settings.BENCH_THREADS),
    '--save-eval', work, '--eval-name', name, '--trajectories', trajectories, '--json',
    ...(engine === 'deterministic' ? ['--deterministic'] : []),
  ]);
  const seconds = (performance.now() - started) / 1000;
  const summary = JSON.parse(stdout.trim().split('\n').at(-1) as string) as { episodes: number; mean_batch_size: number };
  const file = readFileSync(join(work, 'evals', `${name}.json`), 'utf8').replace(/"created_at":"[^"]*"/, '"created_at":""').replace(`"name":"${name}"`, '"name":""');
  const saved = JSON.parse(file) as { episodes: Array<{ question_id: string; seed: number; transcript: unknown }> };
  const transcripts = new Map(saved.episodes.map((ep) => [`${ep.question_id}:${ep.seed}`, JSON.stringify(ep.transcript)]));
  const turns = new Map<string, Array<{ ids: number[]; logprobs: number[] }>>();
  for (const line of readFileSync(trajectories, 'utf8').split('\n').filter((l) => l !== '')) {
    const t = JSON.parse(line) as { question_id: string; seed: number; turns: Array<{ completion_ids: number[]; logprobs: number[] }> };
    turns.set(`${t.question_id}:${t.seed}`, t.turns.map((turn) => ({ ids: turn.completion_ids, logprobs: turn.logprobs })));
  }
  return { seconds, episodes: summary.episodes, meanBatchSize: summary.mean_batch_size, file, transcripts, turns };
}

/** Tokens two runs sampled alike (each turn up to its first differing token), how many of their log-probs differ, and the largest difference. */
function logprobDelta(a: Run, b: Run): { tokens: number; differing: number; maxAbs: number } {
  let tokens = 0;
  let differing = 0;
  let maxAbs = 0;
  for (const [key, turnsA] of a.turns) {
    const turnsB = b.turns.get(key) ?? [];
    for (let t = 0; t < Math.min(turnsA.length, turnsB.length); t++) {
      const x = turnsA[t] as { ids: number[]; logprobs: number[] };
      const y = turnsB[t] as { ids: number[]; logprobs: number[] };
      for (let i = 0; i < Math.min(x.ids.length, y.ids.length) && x.ids[i] === y.ids[i]; i++) {
        const d = Math.abs((x.logprobs[i] as number) - (y.logprobs[i] as number));
        tokens++;
        if (d > 0) differing++;
        maxAbs = Math.max(maxAbs, d);
      }
      if (x.ids.join() !== y.ids.join()) break;
    }
  }
  return { tokens, differing, maxAbs };
}

const bench = startBench(settings.BENCH_RESULTS);
try {
  const runs = await interleavedRounds(ENGINES, settings.BENCH_ROUNDS, evaluateOnce, (done) => process.stderr.write(`${done.variant} round ${done.round}: ${done.result.seconds.toFixed(1)} s\n`), { mirrored: true });
  const byEngine = resultsByVariant(runs);
  const rows = ENGINES.map((engine) => {
    const mine = byEngine.get(engine) ?? [];
    const first = mine[0] as Run;
    const later = mine.slice(1);
    const differingEpisodes = later.map((r) => [...r.transcripts].filter(([key, t]) => first.transcripts.get(key) !== t).length);
    const deltas = later.map((r) => logprobDelta(first, r));
    const seconds = mine.map((r) => r.seconds);
    return {
      engine,
      episodes: first.episodes,
      secondsEach: seconds.map((s) => Math.round(s * 10) / 10),
      episodesPerS: first.episodes / (seconds.reduce((a, b) => a + b, 0) / seconds.length),
      meanBatchSize: mine.reduce((n, r) => n + r.meanBatchSize, 0) / mine.length,
      differingEpisodes,
      sameFile: later.map((r) => r.file === first.file),
      logprobs: deltas,
    };
  });
  const [plain, det] = rows as [(typeof rows)[number], (typeof rows)[number]];
  const cost = 1 - det.episodesPerS / plain.episodesPerS;
  const across = logprobDelta(byEngine.get('default')?.[0] as Run, byEngine.get('deterministic')?.[0] as Run);
  const body = [
    `Settings: models/sqlenv-tiny, temperature 1, every dev question × ${settings.BENCH_SEEDS} seeds, --concurrency ${settings.BENCH_CONCURRENCY}, --threads ${settings.BENCH_THREADS}, ${settings.BENCH_ROUNDS} rounds each, alternately (A B B A …).`,
    '',
    '| engine | episodes | wall s per round | episodes/s (mean) | mean batch | episodes differing from round 1 | saved file same as round 1 | log-probs differing (of tokens sampled alike) | max abs Δ log-prob |',
    '| --- | ---: | --- | ---: | ---: | --- | --- | --- | ---: |',
    ...rows.map((r) => `| ${r.engine} | ${r.episodes} | ${r.secondsEach.join(', ')} | ${r.episodesPerS.toFixed(2)} | ${r.meanBatchSize.toFixed(2)} | ${r.differingEpisodes.join(', ') || '—'} | ${r.sameFile.map((s) => (s ? 'yes' : 'no')).join(', ') || '—'} | ${r.logprobs.map((d) => `${d.differing} of ${d.tokens}`).join(', ') || '—'} | ${r.logprobs.length === 0 ? '—' : Math.max(...r.logprobs.map((d) => d.maxAbs)).toExponential(1)} |`),
    '',
    `Throughput of --deterministic: ${Math.abs(100 * cost).toFixed(1)} % ${cost >= 0 ? 'fewer' : 'more'} episodes per second than the default engine.`,
    `Default against deterministic (first rounds): ${across.differing} of ${across.tokens} log-probs of tokens sampled alike differ, by at most ${across.maxAbs.toExponential(1)}.`,
  ];
  bench.write({ title: 'Deterministic evaluations: --deterministic against the default engine', body, data: { settings, rows, cost, across } });
} finally {
  rmSync(work, { recursive: true, force: true });
}
