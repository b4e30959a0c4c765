/**
 * bench:rollout-remote — episodes/s of `sqlenv eval --policy model` playing built-in-dataset episodes
 * with its own inference engine (`in-process`) against the same command sampling from a `sqlenv
 * serve-model` child process over HTTP (`serve-model`, `--inference-url`), in alternating rounds.
 *
 * Each configuration (model × `--concurrency` × workers) runs both variants BENCH_ROUNDS times. A
 * run starts `workers` eval processes at once, each playing its share of BENCH_EPISODES (worker w
 * draws its questions and episode seeds with `--seed w`, so the workers' episodes differ; both
 * variants play the same episodes), against one server (a fresh one per run: both sides start
 * with a cold ONNX Runtime) or each with its own engine. The CLI reports no play time, so a run
 * times the whole commands and then times the same processes playing one episode each (start-up:
 * process, model and engine or server check, one episode); "net" episodes/s divide by the
 * difference. The server gets the threads, batch rows and engine replicas the in-process engines
 * have together (`replicaPlan` of each eval process, times the workers) and no LoRA inputs
 * (`--max-loras 0`, as `eval` runs a base model without an adapter). Temperature 1, as rollouts sample.
 * Writes <results dir>/rollout-remote.md and .json.
 *
 *   npm run bench:rollout-remote
 *   BENCH_MODELS=sqlenv-tiny,sqlenv-base BENCH_CONCURRENCY=32 BENCH_ROUNDS=5 npm run bench:rollout-remote   # both checkpoints, the target's row
 *   BENCH_CONCURRENCY=8 BENCH_WORKERS=1 BENCH_ROUNDS=1 BENCH_EPISODES=8 BENCH_RESULTS_DIR=/tmp/rr npm run bench:rollout-remote   # smallest
 */
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { countParameters, readModelConfig, replicaPlan, type EngineStats } from '@sqlenv/model';
import { benchSettings, interleavedRounds, loadAverage1mNow, median, positiveInt, repoRoot, runSqlenvAsync, startBench, startServeModel } from './lib/harness.ts';

const MODEL_NAMES = ['sqlenv-tiny', 'sqlenv-base'] as const;
const VARIANTS = ['in-process', 'serve-model'] as const;
type Variant = (typeof VARIANTS)[number];

const intList = (fallback: string) =>
  z
    .string()
    .default(fallback)
    .transform((text) => text.split(',').map(Number))
    .pipe(z.array(z.number().int().positive()).min(1));

const SettingsSchema = z.object({
  BENCH_MODELS: z
    .string()
    .default('sqlenv-tiny')
    .transform((text) => text.split(','))
    .pipe(z.array(z.enum(MODEL_NAMES)).min(1)),
  /** `--concurrency` of each eval process. */
  BENCH_CONCURRENCY: intList('8,32,64'),
  /** Eval processes at once. */
  BENCH_WORKERS: intList('1,2'),
  BENCH_ROUNDS: positiveInt(3),
  /** Episodes of a run, all workers together. */
  BENCH_EPISODES: positiveInt(256),
  /** ORT threads of each eval process's engine (`--threads`); the server gets this times the workers. */
  BENCH_THREADS: positiveInt(2),
});
const settings = benchSettings(SettingsSchema);
const EVAL_TIMEOUT_MS = 60 * 60_000;

/** The fields of `sqlenv eval --json` this bench reads. */
const EvalSummarySchema = z.object({
  episodes: z.number().int().nonnegative(),
  errors: z.number().int().nonnegative(),
  mean_steps: z.number(),
  mean_generated_tokens: z.number(),
  mean_batch_size: z.number().optional(),
});
type EvalSummary = z.infer<typeof EvalSummarySchema>;

interface Config {
  model: (typeof MODEL_NAMES)[number];
  modelDir: string;
  concurrency: number;
  workers: number;
  /** Engine replicas of one in-process eval (replicaPlan). */
  replicas: number;
}

interface ServerStats {
  meanBatchSize: number;
  turns: number;
  prefillTokens: number;
  reusedTokens: number;
  sharedTokens: number;
}

interface Run {
  model: string;
  variant: Variant;
  concurrency: number;
  workers: number;
  round: number;
  episodes: number;
  errors: number;
  meanSteps: number;
  wallS: number;
  startupS: number;
  episodesPerS: number;
  /** Episodes ÷ (wall − start-up); null when the start-up run took as long. */
  netEpisodesPerS: number | null;
  /** Mean decode batch: the eval processes' own engines (in-process), the server's (serve-model). */
  meanBatchSize: number | null;
  /** serve-model: the server's engine counters over the timed run. */
  server: ServerStats | null;
  loadAverage1m: number;
}

const round2 = (x: number): number => Math.round(x * 100) / 100;
const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;

/** Worker w's share of `total` episodes. */
function shareOf(total: number, workers: number, w: number): number {
  return Math.floor(total / workers) + (w < total % workers ? 1 : 0);
}

function evalArgs(config: Config, worker: number, episodes: number, extra: readonly string[]): string[] {
  const c = String(config.concurrency);
  return ['eval', '--policy', 'model', '--model', config.modelDir, '--episodes', String(episodes), '--concurrency', c, '--seed', String(worker), '--temperature', '1', '--threads', String(settings.BENCH_THREADS), '--json', ...extra];
}

/** `workers` eval processes at once; wall seconds until the last exits, and each one's summary. */
async function playAll(config: Config, episodesOf: (w: number) => number, extra: readonly string[]): Promise<{ wallS: number; summaries: EvalSummary[] }> {
  const started = performance.now();
  const outputs = await Promise.all(
    Array.from({ length: config.workers }, (_, w) => runSqlenvAsync(evalArgs(config, w, episodesOf(w), extra), EVAL_TIMEOUT_MS)),
  );
  const wallS = (performance.now() - started) / 1000;
  const summaries = outputs.map((out) => EvalSummarySchema.parse(JSON.parse(out.trim().split('\n').at(-1) ?? '')));
  return { wallS, summaries };
}

function serverFlags(config: Config): string[] {
  const w = config.workers;
  // The commands refuse more threads than cores; the replicas still match the eval processes' together.
  const threads = Math.min(availableParallelism(), settings.BENCH_THREADS * w);
  return ['--model', config.modelDir, '--threads', String(threads), '--max-batch-size', String(config.concurrency * w), '--replicas', String(config.replicas * w), '--max-loras', '0', '--log-level', 'info'];
}

function serverStats(stats: Partial<EngineStats>): ServerStats {
  return { meanBatchSize: round2(stats.meanBatchSize ?? 0), turns: stats.turns ?? 0, prefillTokens: stats.prefillTokens ?? 0, reusedTokens: stats.reusedTokens ?? 0, sharedTokens: stats.sharedTokens ?? 0 };
}

/** One variant's run: the timed episodes, then the start-up run (after, so it warms nothing the timed run uses). */
async function runVariant(config: Config, variant: Variant, round: number): Promise<Run> {
  const share = (w: number): number => shareOf(settings.BENCH_EPISODES, config.workers, w);
  let timed: Awaited<ReturnType<typeof playAll>>;
  let startup: Awaited<ReturnType<typeof playAll>>;
  let server: ServerStats | null = null;
  if (variant === 'in-process') {
    timed = await playAll(config, share, []);
    startup = await playAll(config, () => 1, []);
  } else {
    const child = await startServeModel(serverFlags(config));
    try {
      const remote = ['--inference-url', child.url, '--inference-concurrency', String(config.concurrency)];
      timed = await playAll(config, share, remote);
      server = serverStats(await child.engineStats());
      startup = await playAll(config, () => 1, remote);
    } finally {
      await child.stop();
    }
  }
  const episodes = timed.summaries.reduce((n, s) => n + s.episodes, 0);
  const playS = timed.wallS - startup.wallS;
  const ownBatches = timed.summaries.flatMap((s) => (s.mean_batch_size === undefined ? [] : [s.mean_batch_size]));
  return {
    model: config.model,
    variant,
    concurrency: config.concurrency,
    workers: config.workers,
    round,
    episodes,
    errors: timed.summaries.reduce((n, s) => n + s.errors, 0),
    meanSteps: round2(mean(timed.summaries.map((s) => s.mean_steps))),
    wallS: round2(timed.wallS),
    startupS: round2(startup.wallS),
    episodesPerS: round2(episodes / timed.wallS),
    netEpisodesPerS: playS > 0 ? round2(episodes / playS) : null,
    meanBatchSize: server?.meanBatchSize ?? (ownBatches.length === 0 ? null : round2(mean(ownBatches))),
    server,
    loadAverage1m: loadAverage1mNow(),
  };
}

function configsOf(): Config[] {
  return settings.BENCH_MODELS.flatMap((model) => {
    const modelDir = join(repoRoot, 'models', model);
    const weightBytes = 4 * countParameters(readModelConfig(modelDir));
    return settings.BENCH_CONCURRENCY.flatMap((concurrency) => {
      // The plan `sqlenv eval` makes for its engine (createModelResources).
      const { replicas } = replicaPlan({ provider: 'cpu', threads: settings.BENCH_THREADS, maxBatchSize: concurrency, weightBytes });
      return settings.BENCH_WORKERS.map((workers) => ({ model, modelDir, concurrency, workers, replicas }));
    });
  });
}

interface Summary {
  model: string;
  concurrency: number;
  workers: number;
  replicas: number;
  inProcess: { episodesPerS: number; netEpisodesPerS: number | null; meanBatchSize: number | null };
  serveModel: { episodesPerS: number; netEpisodesPerS: number | null; meanBatchSize: number | null; prefillTokensPerTurn: number; reusedTokensPerTurn: number };
  /** Median over rounds of in-process ÷ serve-model episodes/s, whole commands and net of start-up. */
  ratio: number;
  netRatio: number | null;
}

const medianOrNull = (xs: readonly (number | null)[]): number | null => {
  const known = xs.filter((x): x is number => x !== null);
  return known.length === 0 ? null : round2(median(known));
};

function summarize(config: Config, runs: readonly Run[]): Summary {
  const side = (v: Variant): Run[] => runs.filter((r) => r.variant === v).sort((a, b) => a.round - b.round);
  const [ins, outs] = [side('in-process'), side('serve-model')];
  const pairs = ins.flatMap((a, i) => (outs[i] === undefined ? [] : [[a, outs[i]] as const]));
  const servers = outs.flatMap((r) => (r.server === null ? [] : [r.server]));
  const perTurn = (key: 'prefillTokens' | 'reusedTokens'): number => Math.round(servers.reduce((n, s) => n + s[key], 0) / Math.max(1, servers.reduce((n, s) => n + s.turns, 0)));
  return {
    model: config.model,
    concurrency: config.concurrency,
    workers: config.workers,
    replicas: config.replicas,
    inProcess: { episodesPerS: round2(median(ins.map((r) => r.episodesPerS))), netEpisodesPerS: medianOrNull(ins.map((r) => r.netEpisodesPerS)), meanBatchSize: medianOrNull(ins.map((r) => r.meanBatchSize)) },
    serveModel: {
      episodesPerS: round2(median(outs.map((r) => r.episodesPerS))),
      netEpisodesPerS: medianOrNull(outs.map((r) => r.netEpisodesPerS)),
      meanBatchSize: medianOrNull(outs.map((r) => r.meanBatchSize)),
      prefillTokensPerTurn: perTurn('prefillTokens'),
      reusedTokensPerTurn: perTurn('reusedTokens'),
    },
    ratio: round2(median(pairs.map(([a, b]) => a.episodesPerS / b.episodesPerS))),
    netRatio: medianOrNull(pairs.map(([a, b]) => (a.netEpisodesPerS === null || b.netEpisodesPerS === null ? null : a.netEpisodesPerS / b.netEpisodesPerS))),
  };
}

const dash = (x: number | null): string => (x === null ? '—' : String(x));

function summaryTable(summaries: readonly Summary[]): string[] {
  return [
    '| model | in flight per eval process | eval processes | replicas per engine side | in-process episodes/s (net / whole) | serve-model episodes/s (net / whole) | in-process ÷ serve-model (net / whole) | mean decode batch: in-process / serve-model | serve-model prefill / reused tokens per turn |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...summaries.map(
      (s) =>
        `| ${s.model} | ${s.concurrency} | ${s.workers} | ${s.replicas * s.workers} | ${dash(s.inProcess.netEpisodesPerS)} / ${s.inProcess.episodesPerS} | ${dash(s.serveModel.netEpisodesPerS)} / ${s.serveModel.episodesPerS} | ${dash(s.netRatio)} / ${s.ratio} | ${dash(s.inProcess.meanBatchSize)} / ${dash(s.serveModel.meanBatchSize)} | ${s.serveModel.prefillTokensPerTurn} / ${s.serveModel.reusedTokensPerTurn} |`,
    ),
  ];
}

function runTable(runs: readonly Run[]): string[] {
  return [
    '| model | in flight | processes | variant | round | episodes | errors | mean steps | wall s | start-up s | episodes/s | net episodes/s | mean decode batch | load (1 min) |',
    '| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...runs.map((r) => `| ${r.model} | ${r.concurrency} | ${r.workers} | ${r.variant} | ${r.round + 1} | ${r.episodes} | ${r.errors} | ${r.meanSteps} | ${r.wallS} | ${r.startupS} | ${r.episodesPerS} | ${dash(r.netEpisodesPerS)} | ${dash(r.meanBatchSize)} | ${r.loadAverage1m} |`),
  ];
}

const bench = startBench('rollout-remote');
const runs: Run[] = [];
const summaries: Summary[] = [];
for (const config of configsOf()) {
  const done = await interleavedRounds(VARIANTS, settings.BENCH_ROUNDS, (variant, round) => runVariant(config, variant, round), ({ result }) => process.stderr.write(`${JSON.stringify(result)}\n`), { mirrored: true });
  const configRuns = done.map((d) => d.result);
  runs.push(...configRuns);
  summaries.push(summarize(config, configRuns));
}
const shown = { models: settings.BENCH_MODELS, concurrency: settings.BENCH_CONCURRENCY, workers: settings.BENCH_WORKERS, rounds: settings.BENCH_ROUNDS, episodes: settings.BENCH_EPISODES, threads: settings.BENCH_THREADS };
const body = [
  `Settings: ${JSON.stringify(shown)}. \`sqlenv eval --policy model --temperature 1\` on the built-in dataset, each eval process with \`--threads ${settings.BENCH_THREADS}\` and \`--concurrency\` = in flight; the serve-model server with the eval processes' threads, batch rows and replicas together, \`--max-loras 0\`, a fresh one per run. Target: serve-model within 1.25× of in-process at 32 in flight.`,
  '',
  ...summaryTable(summaries),
  '',
  '- *net*: episodes ÷ (wall time of the eval processes − wall time of the same processes playing one episode each, the start-up); *whole*: episodes ÷ the wall time of the whole commands. Ratios and episodes/s are medians over rounds.',
  '- *mean decode batch*: rows per decode step (rowSteps ÷ steps): in-process, the mean of the eval processes\' `mean_batch_size`; serve-model, the server\'s `/metrics` over the timed run. *Prefill / reused tokens per turn*: the server\'s `prefillTokens` and `reusedTokens` per turn (tokens fed to the model, and tokens served from a kept KV cache).',
  '- The cores are shared with other jobs (load average per run below): compare the variants of one configuration, not runs of different days.',
  '',
  '## Every run',
  '',
  ...runTable(runs),
];
bench.write({ title: 'bench:rollout-remote — agent rollouts: in-process engine vs serve-model over HTTP', body, data: { settings: shown, summaries, runs } });
process.stdout.write(`${summaryTable(summaries).join('\n')}\n`);
