/**
 * The LLM agent inside a rollout worker, today's static engine against the
 * continuous one, side by side in one run:
 *
 * - `sqlenv-tiny` (models/sqlenv-tiny: the shape of models/sqlenv-base, the checkpoint `npm start` uses) plays built-in-dataset
 *   episodes through one RolloutWorker (in-process transport, statistics-only trainer) with
 *   1 / 8 / 32 / 64 episodes in flight, all served by one InferenceEngine;
 * - the same checkpoint with synthetic episodes straight through the engine (no environment: what
 *   the engine alone sustains), and a Qwen3-0.6B-shaped random checkpoint the same way (8 in flight,
 *   a 1,536-token first prompt, observations appended between turns).
 *
 * Engines: the variants of bench/lib/engine-variants.ts (`default` is the engine as the CLI runs it,
 * `static` the engine before per-turn caches). Each configuration runs in a child process of its own,
 * so its peak RSS is its own; a configuration's engines run alternately for BENCH_ROUNDS rounds.
 * Writes <results dir>/<BENCH_RESULTS, default rollout-llm>.md and .json.
 *
 *   npm run bench:rollout-llm
 *   BENCH_MODELS=sqlenv-tiny BENCH_CONCURRENCY=8,32 BENCH_EPISODES_PER_SLOT=1 npm run bench:rollout-llm   # shorter
 *   BENCH_ENGINES=continuous-no-prefix-share,default BENCH_ROUNDS=2 BENCH_RESULTS=rollout-llm-prefix …    # some engines, another file
 *   BENCH_MODELS=sqlenv-tiny-engine BENCH_CONCURRENCY=1 BENCH_ENGINES=default BENCH_RESULTS_DIR=/tmp/r … # smallest
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { InferenceEngine, modelFingerprint, presetConfig, readModelConfig, writeRandomCheckpoint } from '@sqlenv/model';
import { RolloutRunSpecSchema } from '@sqlenv/protocol';
import { createModelResources, InProcessTransport, RolloutWorker, runCoordinator, runTrainer, RuntimeCache, scheduledQuestions, StatsPolicyUpdater } from '@sqlenv/rollout';
import { ENGINE_VARIANTS, parseEngineVariants, type EngineSetting, type EngineVariant } from './lib/engine-variants.ts';
import { childPayload, interleavedRounds, replyToParent, runChild, startBench } from './lib/harness.ts';

/** ORT threads of the process (the commands' `--threads`), split over replicas as the commands do. Default 1. */
const THREADS = Number(process.env['BENCH_THREADS'] ?? 1);
const RUN_ENGINES = parseEngineVariants(process.env['BENCH_ENGINES']);
/** Each configuration's engines run alternately, this many times each. */
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 1);
type EngineName = EngineVariant;

interface ChildSpec {
  kind: 'tiny-rollout' | 'engine-turns';
  /** engine-turns: which synthetic episode shape (ENGINE_EPISODES). */
  shape?: EngineShapeName;
  engine: EngineName;
  concurrency: number;
  modelDir: string;
}

interface Row {
  model: string;
  engine: EngineName;
  /** Which of the BENCH_ROUNDS rounds of its configuration (0-based; absent in rows measured before rounds). */
  round?: number;
  concurrency: number;
  episodes: number;
  seconds: number;
  episodesPerS: number;
  tokensPerS: number;
  turns: number;
  prefillTokensPerTurn: number;
  /** Prompt tokens per turn served from a shared prefix (absent in rows measured before prefix sharing). */
  sharedTokensPerTurn?: number;
  meanBatchSize: number;
  /** Turns inside a model run on average, all replicas together: Σ rows × run time ÷ wall time (absent in rows measured before). */
  rowsInRuns?: number;
  /** Per turn, milliseconds: inside runs (rows × run time ÷ turns), stalled (decoding rows sitting out other turns' prefill runs; absent in rows measured before), queued before its prefill, away (since its episode's last turn: the agent, the environment, the replica's running chunk). */
  turnMs?: { inRuns: number; stalled?: number; queued: number; away: number };
  /** Share of the engine threads' run time spent in runs that prefill admitted turns (absent in rows measured before). */
  admitShare?: number;
  /** Agent rollouts: episodes between the start and the end of their job on average (Σ episode time ÷ wall time; absent in rows measured before). */
  episodesInFlight?: number;
  /** Agent rollouts: share of the wall time the process's main thread (agents, worker, transport) was busy (absent in rows measured before). */
  agentThreadBusy?: number;
  rowStepsPerToken: number;
  runs: number;
  peakRssMiB: number;
  /** CPU time of the benchmark's process (all its threads: engine replicas, agents, environments) per episode, in milliseconds (absent in rows measured before). */
  cpuMsPerEpisode?: number;
}

const here = fileURLToPath(new URL('.', import.meta.url));
const TINY_DIR = join(here, '..', 'models', 'sqlenv-tiny');
const BASE_DIR = join(here, '..', 'models', 'sqlenv-base');
const TINY_MAX_NEW_TOKENS = 96;
const TINY_CONTEXT_TOKENS = 2048;
const EPISODES_PER_SLOT = Number(process.env['BENCH_EPISODES_PER_SLOT'] ?? 2);
/** Synthetic episodes straight through the engine (no environment): a first prompt, then turns that append the reply and an observation. */
interface EngineShape {
  model: string;
  promptTokens: number;
  turns: number;
  maxNewTokens: number;
  observationTokens: number;
}
const ENGINE_EPISODES = {
  // sqlenv-tiny's own agent episodes, measured above: ~190 context tokens per turn, ~13-token replies (stop early at T 1 here).
  'sqlenv-tiny': { model: 'sqlenv-tiny (engine only)', promptTokens: 400, turns: 5, maxNewTokens: 48, observationTokens: 60 },
  'qwen3-0.6b': { model: 'qwen3-0.6b shapes', promptTokens: 1536, turns: Number(process.env['BENCH_QWEN_TURNS'] ?? 3), maxNewTokens: 16, observationTokens: 48 },
} as const satisfies Record<string, EngineShape>;
type EngineShapeName = keyof typeof ENGINE_EPISODES;

/** Peak RSS of this process while `work` runs, sampled every 20 ms. */
async function withPeakRss<T>(work: () => Promise<T>): Promise<{ value: T; peakRssMiB: number }> {
  let peak = process.memoryUsage.rss();
  const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 20);
  try {
    const value = await work();
    return { value, peakRssMiB: Math.round(Math.max(peak, process.memoryUsage.rss()) / 2 ** 20) };
  } finally {
    clearInterval(timer);
  }
}

function round(x: number, digits: number): number {
  return Number(x.toFixed(digits));
}

/** CPU milliseconds (user + system, every thread) this process spends in `work`. */
async function withCpuMs<T>(work: () => Promise<T>): Promise<{ value: T; cpuMs: number }> {
  const start = process.cpuUsage();
  const value = await work();
  const used = process.cpuUsage(start);
  return { value, cpuMs: (used.user + used.system) / 1000 };
}

function statsRow(model: string, spec: ChildSpec, episodes: number, seconds: number, before: InferenceEngine['stats'], after: InferenceEngine['stats'], peakRssMiB: number, cpuMs: number): Row {
  const d = (k: keyof InferenceEngine['stats']): number => after[k] - before[k];
  return {
    model,
    engine: spec.engine,
    concurrency: spec.concurrency,
    episodes,
    seconds: round(seconds, 2),
    episodesPerS: round(episodes / seconds, 2),
    tokensPerS: Math.round(d('generatedTokens') / seconds),
    turns: d('turns'),
    prefillTokensPerTurn: Math.round(d('prefillTokens') / d('turns')),
    sharedTokensPerTurn: Math.round(d('sharedTokens') / d('turns')),
    meanBatchSize: round(d('rowSteps') / d('steps'), 2),
    rowsInRuns: round(d('rowMs') / (seconds * 1000), 1),
    turnMs: { inRuns: Math.round(d('rowMs') / d('turns')), stalled: Math.round(d('stalledRowMs') / d('turns')), queued: Math.round(d('queueMs') / d('turns')), away: d('returns') === 0 ? 0 : Math.round(d('awayMs') / d('returns')) },
    admitShare: d('busyMs') === 0 ? 0 : round(d('admitMs') / d('busyMs'), 2),
    rowStepsPerToken: round(d('rowSteps') / d('generatedTokens'), 2),
    runs: d('runs'),
    peakRssMiB,
    cpuMsPerEpisode: Math.round(cpuMs / episodes),
  };
}

/** sqlenv-tiny through a RolloutWorker: an untimed pass first (ONNX Runtime's first runs of new shapes are slow), then the timed one. */
async function tinyRollout(spec: ChildSpec): Promise<Row> {
  const runtimes = new RuntimeCache({ executorPoolSize: 1 });
  const runtime = await runtimes.get('builtin');
  const dataset = runtime.dataset;
  const runSpec = (label: string, episodes: number) =>
    RolloutRunSpecSchema.parse({
      run_id: `bench-llm-${spec.engine}-${spec.concurrency}-${label}`,
      seed: label === 'warm-up' ? 1 : 0,
      dataset: 'builtin',
      policy: 'model',
      episodes,
      group_size: 4,
      groups_per_batch: 1,
      max_staleness: 1_000, // never wait for the trainer: this measures the worker
      drop_zero_variance: false,
      model: { fingerprint: modelFingerprint(spec.modelDir), lora: { rank: 8 }, sampling: { temperature: 1 }, max_new_tokens: TINY_MAX_NEW_TOKENS, context_tokens: TINY_CONTEXT_TOKENS },
    });
  const episodes = Math.max(8, Math.ceil((spec.concurrency * EPISODES_PER_SLOT) / 4) * 4);
  const { replicas, threads, ...experimental } = ENGINE_VARIANTS[spec.engine] as EngineSetting;
  const model = await createModelResources(runSpec('warm-up', 8).model!, spec.modelDir, {
    maxBatchSize: spec.concurrency,
    experimental,
    execution: { provider: 'cpu', deviceId: 0, intraOpThreads: threads ?? THREADS, interOpThreads: 1 },
    ...(replicas === undefined ? {} : { replicas }),
  });
  // An episode holds its environment from its start to its end: Σ environment lifetimes ÷ wall time = episodes in flight.
  let episodeMs = 0;
  const timedEnvironment = () => {
    const env = runtime.createEnvironment();
    const created = performance.now();
    return {
      reset: env.reset.bind(env),
      step: env.step.bind(env),
      close: async () => {
        episodeMs += performance.now() - created;
        await env.close();
      },
    };
  };
  const play = async (label: string, count: number): Promise<number> => {
    const s = runSpec(label, count);
    const transport = new InProcessTransport();
    const worker = new RolloutWorker({
      transport,
      resolveRun: () => Promise.resolve({ policy: model.policy, environments: { create: timedEnvironment }, applyWeights: model.applyWeights, sampling: model.sampling }),
      concurrency: spec.concurrency,
      runId: s.run_id,
      workerId: 'bench',
      discoveryMs: 100,
    });
    try {
      await transport.registerRun(s);
      await worker.start();
      const started = performance.now();
      const trainer = runTrainer({ transport, runId: s.run_id, updater: new StatsPolicyUpdater(), pollMs: 20, runWaitMs: 10_000 });
      const summary = await runCoordinator({ transport, spec: s, questions: scheduledQuestions(dataset, s.split), pollMs: 20 });
      const seconds = (performance.now() - started) / 1000;
      await trainer;
      if (summary.episodes_completed !== count) throw new Error(`only ${summary.episodes_completed} of ${count} episodes completed`);
      return seconds;
    } finally {
      await worker.close();
      await transport.close();
    }
  };
  try {
    const { value, peakRssMiB } = await withPeakRss(async () => {
      await play('warm-up', Math.max(4, Math.min(16, spec.concurrency)));
      const before = model.engine.stats;
      episodeMs = 0;
      const loop = performance.eventLoopUtilization();
      const { value: seconds, cpuMs } = await withCpuMs(() => play('timed', episodes));
      return { before, seconds, cpuMs, agentThreadBusy: performance.eventLoopUtilization(loop).utilization, inFlight: episodeMs / (seconds * 1000) };
    });
    const row = statsRow(basename(spec.modelDir), spec, episodes, value.seconds, value.before, model.engine.stats, peakRssMiB, value.cpuMs);
    return { ...row, episodesInFlight: round(value.inFlight, 1), agentThreadBusy: round(value.agentThreadBusy, 2) };
  } finally {
    await model.close();
    await runtimes.close();
  }
}

/** `spec.concurrency` synthetic episodes in flight straight through the engine, each turn's prompt the last context + reply + an observation. */
async function engineTurns(spec: ChildSpec): Promise<Row> {
  const shape: EngineShape = ENGINE_EPISODES[spec.shape ?? 'sqlenv-tiny'];
  const vocabSize = readModelConfig(spec.modelDir).vocabSize;
  const { value, peakRssMiB } = await withPeakRss(async () => {
    const { threads, ...engineOptions } = ENGINE_VARIANTS[spec.engine] as EngineSetting;
    const engine = await InferenceEngine.start({ modelDir: spec.modelDir, maxBatchSize: spec.concurrency, disablePrepacking: true, ...(threads === undefined ? {} : { intraOpThreads: threads }), ...engineOptions });
    const episode = async (e: number, label: number): Promise<void> => {
      const context = Array.from({ length: shape.promptTokens - (e % 16) }, (_, t) => (t * 7919 + e * 104_729 + label) % vocabSize);
      for (let turn = 0; turn < shape.turns; turn++) {
        const r = await engine.generate({ promptIds: context, maxNewTokens: shape.maxNewTokens, seed: label * 1e6 + e * 100 + turn, temperature: 1, cacheKey: `${label}-${e}` });
        context.push(...r.tokens, ...Array.from({ length: shape.observationTokens }, (_, t) => (t * 31 + turn * 17 + e) % vocabSize));
      }
    };
    try {
      // An untimed pass of a few episodes: ONNX Runtime's first runs of new shapes are slow.
      await Promise.all(Array.from({ length: Math.min(4, spec.concurrency) }, (_, e) => episode(e, 1)));
      const before = engine.stats;
      const started = performance.now();
      const { cpuMs } = await withCpuMs(() => Promise.all(Array.from({ length: spec.concurrency }, (_, e) => episode(e, 0))));
      return { before, seconds: (performance.now() - started) / 1000, after: engine.stats, cpuMs };
    } finally {
      await engine.close();
    }
  });
  return statsRow(shape.model, spec, spec.concurrency, value.seconds, value.before, value.after, peakRssMiB, value.cpuMs);
}

// ---- child: one configuration, one result line --------------------------------------------
const childSpec = childPayload() as ChildSpec | undefined;
if (childSpec !== undefined) {
  replyToParent(childSpec.kind === 'tiny-rollout' ? await tinyRollout(childSpec) : await engineTurns(childSpec));
  process.exit(0);
}

// ---- parent: every configuration, its engines alternately for BENCH_ROUNDS rounds ------------
const bench = startBench(process.env['BENCH_RESULTS'] ?? 'rollout-llm');
const MODELS = (process.env['BENCH_MODELS'] ?? 'sqlenv-tiny,sqlenv-tiny-engine,qwen3-0.6b').split(',');
const CONCURRENCIES = (process.env['BENCH_CONCURRENCY'] ?? '1,8,32,64').split(',').map(Number);
const root = mkdtempSync(join(tmpdir(), 'sqlenv-bench-llm-'));

/** One configuration's engines, alternately, each in a child process of its own. */
async function runEngines(spec: Omit<ChildSpec, 'engine'>): Promise<Row[]> {
  const runs = await interleavedRounds(RUN_ENGINES, ROUNDS, (engine, round) => ({ ...(runChild(fileURLToPath(import.meta.url), { ...spec, engine }) as Row), round }), ({ result }) => process.stderr.write(`${JSON.stringify(result)}\n`));
  return runs.map((r) => r.result);
}

// Rows of an earlier run's rollout-llm.json to keep in the table (configurations measured separately, each pair still one run).
const earlier = process.env['BENCH_INCLUDE'];
const included = earlier === undefined ? undefined : (JSON.parse(readFileSync(earlier, 'utf8')) as { machine: unknown; rows: Row[] });
const rows: Row[] = [...(included?.rows ?? [])];
// Agent rollouts of the shipped checkpoints (same shape: sqlenv-tiny, and sqlenv-base that npm start uses).
for (const [name, modelDir] of [['sqlenv-tiny', TINY_DIR], ['sqlenv-base', BASE_DIR]] as const) {
  if (!MODELS.includes(name)) continue;
  for (const concurrency of CONCURRENCIES) {
    rows.push(...(await runEngines({ kind: 'tiny-rollout', concurrency, modelDir })));
  }
}
if (MODELS.includes('sqlenv-tiny-engine')) {
  for (const concurrency of CONCURRENCIES) {
    rows.push(...(await runEngines({ kind: 'engine-turns', shape: 'sqlenv-tiny', concurrency, modelDir: TINY_DIR })));
  }
}
if (MODELS.includes('qwen3-0.6b')) {
  const qwenDir = join(root, 'qwen3-0.6b');
  writeRandomCheckpoint(qwenDir, presetConfig('qwen3-0.6b'), { seed: 1, initStd: 0.02 });
  rows.push(...(await runEngines({ kind: 'engine-turns', shape: 'qwen3-0.6b', concurrency: 8, modelDir: qwenDir })));
}
rmSync(root, { recursive: true, force: true });

const includedNote =
  included === undefined ? [] : [`Rows ${included.rows.map((r) => `${r.model} ${r.concurrency}`).filter((v, i, a) => a.indexOf(v) === i).join(', ')} from ${earlier}, measured on the machine recorded there as \`includedMachine\`; the rest in this run.`, ''];
function shapeText(name: EngineShapeName): string {
  const s = ENGINE_EPISODES[name];
  return `a ${s.promptTokens}-token first prompt, ${s.turns} turns of at most ${s.maxNewTokens} new tokens, ${s.observationTokens} observation tokens appended after each`;
}
/** Against the first engine run in the same configuration and round. */
const speedup = (r: Row): string => {
  const base = rows.find((o) => o.model === r.model && o.concurrency === r.concurrency && o.round === r.round);
  return base === undefined || base === r ? '' : ` (${round(r.episodesPerS / base.episodesPerS, 2)}× ${base.engine})`;
};
const table = [
  '| model | in flight | engine | episodes | episodes/s | generated tokens/s | prefill tokens per turn | shared-prefix tokens per turn | mean batch | episodes in flight | turns in a run (all replicas) | ms per turn: in runs / stalled / queued / away | share of run time in prefill runs | agent thread busy | row-steps ÷ returned tokens | runs | peak RSS (MiB) | CPU ms per episode |',
  '| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ...rows.map((r) => `| ${r.model} | ${r.concurrency} | ${r.engine}${r.round === undefined || ROUNDS === 1 ? '' : ` (round ${r.round + 1})`} | ${r.episodes} | ${r.episodesPerS}${speedup(r)} | ${r.tokensPerS} | ${r.prefillTokensPerTurn} | ${r.sharedTokensPerTurn ?? '—'} | ${r.meanBatchSize} | ${r.episodesInFlight ?? '—'} | ${r.rowsInRuns ?? '—'} | ${r.turnMs === undefined ? '—' : `${r.turnMs.inRuns} / ${r.turnMs.stalled ?? '—'} / ${r.turnMs.queued} / ${r.turnMs.away}`} | ${r.admitShare === undefined ? '—' : `${Math.round(100 * r.admitShare)} %`} | ${r.agentThreadBusy === undefined ? '—' : `${Math.round(100 * r.agentThreadBusy)} %`} | ${r.rowStepsPerToken} | ${r.runs} | ${r.peakRssMiB} | ${r.cpuMsPerEpisode ?? '—'} |`),
];
const markdown = `ORT threads ${THREADS} per process (agent rollouts: split over the engine replicas by replicaPlan unless the engine says one-replica); ${ROUNDS} round${ROUNDS === 1 ? '' : 's'} of each configuration's engines, alternating.

${table.join('\n')}

- Engines (bench/lib/engine-variants.ts): *default*: the engine as the CLI runs it (per-episode KV caches, continuous batching:
  decode runs of at most 32 steps that end once a quarter of their rows has stopped, turns joining and leaving between runs,
  first turns started from a shared prompt prefix, prompt widths padded to multiples of 32, a small model run as replicas
  splitting the process's ORT threads, \`replicaPlan\`). *static*: \`{ reuseKv: false, batching: 'static' }\`: one batch at a
  time, decoded until its longest row stops, every turn re-prefilling its whole context. *static-one-replica-bucket-128*: the
  static engine as one engine thread with all the process's ORT threads and prompt widths padded to multiples of 128 tokens;
  *static-one-replica-bucket-128-one-thread*: the same on one ORT thread. *continuous-no-prefix-share*: \`{ sharePrefixes: false }\`,
  each episode's first turn prefilled from scratch. *one-replica*: the defaults as one engine thread with all the ORT threads.
  *chunk-8*, *chunk-4*, *one-replica-chunk-8*: decode runs of at most 8 or 4 steps. *chunk-16-stop-all*: fixed decode chunks
  of 16 steps (\`chunkStopShare: 1\`: a run ends only when all its rows have stopped). *stop-one*, *stop-half*: a run ends once
  any one (\`chunkStopShare: 0.01\`) or half (\`0.5\`) of its rows has stopped. *bucket-8*, *bucket-16*: prompt widths padded to
  multiples of 8 or 16 tokens. The same turns, seeds and sampling for every engine. *Waiting for returns*: share of the wall
  time the engine waited for returning episodes between runs.
- *sqlenv-tiny*, *sqlenv-base*: models/sqlenv-tiny or models/sqlenv-base (4 layers, hidden 192, vocabulary 2,048) playing the built-in dataset's train split through
  one RolloutWorker (in-process transport, statistics-only trainer), LoRA rank 8 (zero adapter), temperature 1, at most
  ${TINY_MAX_NEW_TOKENS} new tokens per turn, ${TINY_CONTEXT_TOKENS}-token contexts, ${EPISODES_PER_SLOT} episodes per slot in flight (at least 8); an untimed pass of up
  to 16 episodes on other questions first.
- *engine only*: synthetic episodes straight through the engine, no environment: \`in flight\` episodes at once, a first prompt,
  then turns whose prompt is the last context + the reply + an observation. *sqlenv-tiny (engine only)*: ${shapeText('sqlenv-tiny')}.
  *qwen3-0.6b shapes*: a random checkpoint of Qwen3-0.6B's config (28 layers, 16 query / 8 KV heads × 128, vocabulary
  151,936), ${shapeText('qwen3-0.6b')}.
- *prefill tokens per turn*: prompt tokens fed to the model per turn (cached ones not counted); *shared-prefix tokens per
  turn*: of the cached ones, those taken from another episode's prompt. *Mean batch*: rows per loop
  iteration (row-steps ÷ steps), the batch the decode ran at (each replica its own). *Episodes in flight*: Σ over episodes
  of the time from their start (environment created) to their end ÷ wall time (the rest of the slots: the worker between
  jobs, and the tail of the run, when fewer episodes are left than slots). *Turns in a run*: Σ rows × run time ÷ wall
  time over every replica: how many of the episodes in flight were inside a prefill run or a decode chunk on average (the rest
  were in their environment step, in the agent's parsing and tokenizing, or waiting for the running chunk to end). *ms per
  turn*: inside prefill runs and decode chunks (Σ rows × run time ÷ turns), stalled (a started turn sitting out the prefill
  runs of other turns: its replica runs one thing at a time, and a decode chunk starts only after the prefill run of the turns
  that joined), queued (from the turn's arrival at its replica to
  the start of its prefill run), away (from the end of an episode's turn to the arrival of its next: the agent, its
  environment step, and the wait for the replica's running chunk, since a replica reads its messages between runs).
  *Share of run time in prefill runs*: of the engine threads' time inside runs, the runs that prefill admitted turns.
  *Agent thread busy*: the share of the wall time the process's main thread (agents, rollout worker, in-process transport)
  was busy. *Row-steps ÷ returned tokens*: tokens computed (rows × loop
  iterations) per token returned; the excess is rows decoding past their stop while a batch-mate runs on. *Peak RSS*: of the
  child process that ran the configuration (weights, session, caches). *CPU ms per episode*: that process's CPU time (user +
  system, all its threads: engine replicas, agents, environments) over the timed episodes, per episode: the work an episode
  costs, which moves much less than the wall time when other jobs share the cores.
- Each configuration runs in its own process, the engines of a configuration alternately (BENCH_ROUNDS rounds); the cores are
  shared with other jobs (load average above), so compare the engines of one configuration, not runs of different days.
`;
bench.write({
  title: 'LLM rollout benchmark (CPU): static batches vs continuous batching with per-episode KV caches',
  body: [...includedNote, markdown],
  data: { threads: THREADS, rounds: ROUNDS, engines: RUN_ENGINES, ...(included === undefined ? {} : { includedFrom: earlier, includedMachine: included.machine }), rows },
});
process.stdout.write(markdown);
