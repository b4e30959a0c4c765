/**
 * bench:async — the same episodes with max_staleness 0, 1, 2 and 4 on the distributed path (real
 * Redis, BullMQ transport, a coordinator, two RolloutWorker instances with their own Redis
 * connections, and the trainer), with a synthetic policy whose turn times vary like an LLM's and a
 * trainer update of fixed duration:
 *
 * - Turn time: lognormal, median TURN_MEDIAN_MS, σ = TURN_SIGMA (a long tail: a few turns take many
 *   times the median, as long generations do), 1–3 DESCRIBE turns then ANSWER on the toy
 *   environment. Every delay and turn count derives from the episode's seed, so all four runs play
 *   exactly the same workload.
 * - The policy is a real, if tiny, learner: ANSWER is right with probability σ(θ), θ the policy
 *   weights published by the trainer; the one "token" of each answer carries its behaviour
 *   log-probability and the version that sampled it. The update is a clipped-ratio policy-gradient
 *   step on θ (ε = 0.2) against those recorded log-probabilities, so staleness costs what it costs
 *   a real off-policy learner, and "final reward" is σ(θ_final), the success probability of the
 *   final policy.
 * - The update then sleeps UPDATE_MS: it stands in for the GPU step of a real learner (fixed time,
 *   no CPU), so the trainer-idle fraction is the GPU-idle fraction of such a system.
 *
 * Reports episodes/hour, trainer-idle fraction (1 − update time ÷ wall time) and final reward per
 * run, and the throughput ratios over max_staleness 0. Writes <results dir>/async.md and .json, and
 * a run directory (metrics.jsonl + report.html) per run under the OS temp directory.
 *
 *   npm run bench:async                   (REDIS_URL, default redis://127.0.0.1:6379)
 *   BENCH_EPISODES=128 BENCH_STALENESS=0,4 BENCH_RESULTS_DIR=/tmp/r npm run bench:async   (shorter, elsewhere)
 *   BENCH_EPISODES=16 BENCH_STALENESS=0,1 BENCH_RESULTS_DIR=/tmp/r npm run bench:async    (smallest)
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Policy, type PolicyEpisode, type TokenRecordingEpisode, type TurnTokens } from '@sqlenv/agents';
import { RolloutRunSpecSchema, type SqlAction } from '@sqlenv/protocol';
import { mixSeeds, mulberry32 } from '@sqlenv/shared';
import { BullmqTransport, RolloutWorker, runCoordinator, runTrainer, type PolicyUpdater, type TrainingBatch } from '@sqlenv/rollout';
import { readRunMetrics, RunRecorder, writeRunReport, writeRunSpec, type UpdateStats } from '@sqlenv/runs';
import { TOY_QUESTIONS, toyEnvironments } from '@sqlenv/rollout/testing';
import { interleavedRounds, startBench } from './lib/harness.ts';

const redisUrl = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const EPISODES = Number(process.env['BENCH_EPISODES'] ?? 256);
const STALENESS = (process.env['BENCH_STALENESS'] ?? '0,1,2,4').split(',').map(Number);
const GROUP_SIZE = 4;
const GROUPS_PER_BATCH = 4;
/** Episodes in flight per worker instance; two instances give one batch's worth of slots. */
const WORKER_CONCURRENCY = 8;
const TURN_MEDIAN_MS = 40;
const TURN_SIGMA = 1.0;
const UPDATE_MS = 250;
const THETA_0 = -2;
const LEARNING_RATE = 2.0;
const CLIP_EPSILON = 0.2;
const SEED = 7;
/** "Equal quality": the success probability σ(θ) every run is timed to reach. */
const TARGET_SUCCESS = 0.5;

const sigmoid = (x: number): number => 1 / (1 + Math.exp(-x));
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** A standard normal from two uniforms (Box–Muller). */
function normal(rng: () => number): number {
  return Math.sqrt(-2 * Math.log(1 - rng())) * Math.cos(2 * Math.PI * rng());
}

/** The worker's copy of the policy weights, replaced by each committed version. */
interface PolicyState {
  theta: number;
  version: number;
}

/** Plays the toy question: DESCRIBE 1–3 times, then ANSWER right with probability σ(θ). */
class SyntheticPolicy implements Policy {
  readonly name = 'synthetic';
  readonly #state: PolicyState;

  constructor(state: PolicyState) {
    this.#state = state;
  }

  begin(context: { questionId: string; seed: number }): PolicyEpisode {
    const rng = mulberry32(mixSeeds(SEED, context.seed));
    const describes = 1 + Math.floor(rng() * 3);
    const delays = Array.from({ length: describes + 1 }, () => TURN_MEDIAN_MS * Math.exp(TURN_SIGMA * normal(rng)));
    const uniform = rng();
    const answer = String(Number(context.questionId.replace('toy_q', '')) * 7);
    const state = this.#state;
    let turn = 0;
    let tokens: TurnTokens | null = null;
    const episode: TokenRecordingEpisode = {
      act: async (): Promise<SqlAction> => {
        await sleep(delays[turn] ?? TURN_MEDIAN_MS);
        // The weights that sample this turn: read after the "generation", as an engine swaps adapters between batches.
        const { theta, version } = state;
        turn += 1;
        if (turn <= describes) {
          tokens = { prompt_ids: [], completion_ids: [], loss_mask: [], logprobs: [], parse_error: null, policy_version: version, text: 'DESCRIBE numbers' };
          return { action_type: 'DESCRIBE', argument: 'numbers' };
        }
        const p = sigmoid(theta);
        const right = uniform < p;
        tokens = { prompt_ids: [], completion_ids: [right ? 1 : 0], loss_mask: [1], logprobs: [Math.log(right ? p : 1 - p)], parse_error: null, policy_version: version, text: `ANSWER ${right ? answer : '-1'}` };
        return { action_type: 'ANSWER', argument: right ? answer : '-1' };
      },
      takeTurnTokens: () => {
        const taken = tokens;
        tokens = null;
        return taken;
      },
    };
    return episode;
  }
}

/** One clipped-ratio policy-gradient step on θ per batch, then UPDATE_MS of simulated GPU time. */
class SyntheticUpdater implements PolicyUpdater {
  theta = THETA_0;
  #stats: UpdateStats | null = null;

  restore(weights: Buffer | null): Promise<void> {
    this.theta = weights === null ? THETA_0 : (JSON.parse(weights.toString('utf8')) as { theta: number }).theta;
    return Promise.resolve();
  }

  async update(batch: TrainingBatch): Promise<Buffer> {
    const p = sigmoid(this.theta);
    let gradient = 0;
    let objective = 0;
    let kl = 0;
    let clipped = 0;
    let n = 0;
    batch.groups.forEach((group, g) => {
      (batch.trajectories[g] ?? []).forEach((trajectory, i) => {
        const turn = trajectory.turns.at(-1);
        const behaviour = turn?.logprobs[0];
        if (turn === undefined || behaviour === undefined) return;
        const right = turn.completion_ids[0] === 1;
        const current = Math.log(right ? p : 1 - p);
        const ratio = Math.exp(current - behaviour);
        const advantage = group.advantages[i] ?? 0;
        const bounded = Math.min(Math.max(ratio, 1 - CLIP_EPSILON), 1 + CLIP_EPSILON);
        const isClipped = ratio * advantage > bounded * advantage;
        objective += Math.min(ratio * advantage, bounded * advantage);
        if (isClipped) clipped += 1;
        // d/dθ of ratio·A = ratio·A·d log π/dθ, with d log π/dθ = (right − p) for a Bernoulli on σ(θ).
        else gradient += ratio * advantage * ((right ? 1 : 0) - p);
        kl += behaviour - current;
        n += 1;
      });
    });
    const g = n === 0 ? 0 : gradient / n;
    this.theta += LEARNING_RATE * g;
    this.#stats = { loss: n === 0 ? 0 : -objective / n, kl: n === 0 ? 0 : kl / n, clip_fraction: n === 0 ? 0 : clipped / n, grad_norm: Math.abs(g), learning_rate: LEARNING_RATE, success_probability: sigmoid(this.theta) };
    await sleep(UPDATE_MS);
    return Buffer.from(JSON.stringify({ kind: 'synthetic', theta: this.theta, version: batch.version }));
  }

  lastUpdateStats(): UpdateStats | null {
    return this.#stats;
  }
}

interface Row {
  maxStaleness: number;
  episodes: number;
  seconds: number;
  episodesPerHour: number;
  versions: number;
  droppedGroups: number;
  updateSeconds: number;
  rolloutWaitSeconds: number;
  trainerIdleFraction: number;
  meanStaleness: number;
  maxObservedStaleness: number;
  finalSuccessProbability: number;
  lastBatchesReward: number;
  /** Seconds from the trainer's start until σ(θ) first reached TARGET_SUCCESS (null: never). */
  secondsToTarget: number | null;
  runDir: string;
}

async function runOnce(maxStaleness: number, runsDir: string): Promise<Row> {
  const keyBase = `bench-async-${randomBytes(4).toString('hex')}`;
  const spec = RolloutRunSpecSchema.parse({ run_id: `async-s${maxStaleness}`, policy: 'synthetic', episodes: EPISODES, group_size: GROUP_SIZE, groups_per_batch: GROUPS_PER_BATCH, max_staleness: maxStaleness, seed: SEED });
  const control = new BullmqTransport({ redisUrl, keyBase });
  const workerTransports = [0, 1].map(() => new BullmqTransport({ redisUrl, keyBase }));
  const workers = workerTransports.map(
    (transport, w) =>
      new RolloutWorker({
        transport,
        concurrency: WORKER_CONCURRENCY,
        workerId: `w${w}`,
        discoveryMs: 50,
        resolveRun: () => {
          const state: PolicyState = { theta: THETA_0, version: 0 };
          return Promise.resolve({
            policy: new SyntheticPolicy(state),
            environments: toyEnvironments(),
            applyWeights: (blob, version) => {
              state.theta = blob === null ? THETA_0 : (JSON.parse(blob.toString('utf8')) as { theta: number }).theta;
              state.version = version;
              return Promise.resolve();
            },
          });
        },
      }),
  );
  const runDir = join(runsDir, spec.run_id);
  const recorder = new RunRecorder({ dir: runDir, saveEvery: 0 });
  writeRunSpec(runDir, spec);
  const updater = new SyntheticUpdater();
  try {
    for (const worker of workers) await worker.start();
    const trainer = runTrainer({ transport: control, runId: spec.run_id, updater, pollMs: 20, runWaitMs: 30_000, onCommitted: recorder.onCommitted });
    const summary = await runCoordinator({ transport: control, spec, questions: TOY_QUESTIONS, pollMs: 20 });
    await trainer;
    if (summary.lost_episodes !== 0 || summary.duplicate_trajectories !== 0 || summary.episodes_completed !== EPISODES) throw new Error(`run ${spec.run_id} incomplete: ${JSON.stringify(summary)}`);
    writeRunReport(runDir);
    const lines = readRunMetrics(runDir);
    const sum = (pick: (l: (typeof lines)[number]) => number): number => lines.reduce((s, l) => s + pick(l), 0);
    const histogram = new Map<number, number>();
    for (const l of lines) for (const [k, c] of Object.entries(l.staleness_histogram)) histogram.set(Number(k), (histogram.get(Number(k)) ?? 0) + c);
    const trained = [...histogram.values()].reduce((a, b) => a + b, 0);
    const last = lines.slice(-2);
    const updateSeconds = sum((l) => l.phase_seconds['update'] ?? 0);
    return {
      maxStaleness,
      episodes: summary.episodes_completed,
      seconds: summary.elapsed_s,
      episodesPerHour: (summary.episodes_completed / summary.elapsed_s) * 3600,
      versions: summary.policy_version,
      droppedGroups: summary.groups_dropped,
      updateSeconds,
      rolloutWaitSeconds: sum((l) => l.phase_seconds['rollout_wait'] ?? 0),
      trainerIdleFraction: Math.max(0, 1 - updateSeconds / summary.elapsed_s),
      meanStaleness: trained === 0 ? 0 : [...histogram.entries()].reduce((s, [k, c]) => s + k * c, 0) / trained,
      maxObservedStaleness: Math.max(0, ...histogram.keys()),
      finalSuccessProbability: sigmoid(updater.theta),
      lastBatchesReward: last.length === 0 ? 0 : last.reduce((s, l) => s + l.reward_mean, 0) / last.length,
      secondsToTarget: ((lines.find((l) => (l.extra['success_probability'] ?? 0) >= TARGET_SUCCESS)?.time ?? Number.NaN) / 1000) || null,
      runDir,
    };
  } finally {
    await Promise.all(workers.map((w) => w.close()));
    await Promise.all([control, ...workerTransports].map((t) => t.close()));
  }
}

const bench = startBench('async');
const started = Date.now();
const runsDir = mkdtempSync(join(tmpdir(), 'sqlenv-bench-async-'));
const runs = await interleavedRounds(STALENESS, 1, (s) => runOnce(s, runsDir), ({ variant: s, result: row }) => {
  process.stdout.write(`max_staleness ${s}: ${row.seconds.toFixed(1)} s, ${row.episodesPerHour.toFixed(0)} episodes/h, trainer idle ${(row.trainerIdleFraction * 100).toFixed(0)} %, final σ(θ) ${row.finalSuccessProbability.toFixed(3)}\n`);
});
const rows: Row[] = runs.map((r) => r.result);
const base = rows.find((r) => r.maxStaleness === 0);
const ratio = (r: Row): string => (base === undefined ? '—' : `${(r.episodesPerHour / base.episodesPerHour).toFixed(2)}×`);
const qualityRatio = (r: Row): string => (base?.secondsToTarget == null || r.secondsToTarget === null ? '—' : `${(base.secondsToTarget / r.secondsToTarget).toFixed(2)}×`);
const rowOf = (s: number): Row | undefined => rows.find((r) => r.maxStaleness === s);
const totalS = (Date.now() - started) / 1000;
const table = [
  `| max_staleness | episodes | seconds | episodes/hour | × S=0 | versions | groups dropped (zero variance) | trainer idle | mean / max staleness | final success σ(θ) | reward, last 2 batches | seconds to σ(θ) ≥ ${TARGET_SUCCESS} | × S=0 at equal quality |`,
  '| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ...rows.map(
    (r) =>
      `| ${r.maxStaleness} | ${r.episodes} | ${r.seconds.toFixed(1)} | ${r.episodesPerHour.toFixed(0)} | ${ratio(r)} | ${r.versions} | ${r.droppedGroups} | ${(r.trainerIdleFraction * 100).toFixed(0)} % | ${r.meanStaleness.toFixed(2)} / ${r.maxObservedStaleness} | ${r.finalSuccessProbability.toFixed(3)} | ${r.lastBatchesReward.toFixed(3)} | ${r.secondsToTarget === null ? 'not reached' : r.secondsToTarget.toFixed(1)} | ${qualityRatio(r)} |`,
  ),
].join('\n');
process.stdout.write(`\n${table}\n\nrun directories: ${runsDir}\n`);
const md = `A shared machine: other jobs ran at the same time. Whole bench: ${totalS.toFixed(0)} s.

Real Redis at ${redisUrl.replace(/\/\/[^@]*@/, '//')}, BullMQ transport; one coordinator, two RolloutWorker instances (${WORKER_CONCURRENCY} episodes in flight each, their own Redis connections) and the trainer, all in one Node process. ${EPISODES} episodes per run, groups of ${GROUP_SIZE}, ${GROUPS_PER_BATCH} groups per batch, the same seed (so the same questions, turn counts, turn delays and answer draws) in every run.

- **Policy**: synthetic. Each turn sleeps a lognormal time (median ${TURN_MEDIAN_MS} ms, σ = ${TURN_SIGMA}: a long tail like an LLM's generation lengths), 1–3 DESCRIBE turns then ANSWER, right with probability σ(θ).
- **Learner**: a clipped-ratio (ε = ${CLIP_EPSILON}) policy-gradient step on θ (start ${THETA_0}, σ(θ₀) = ${sigmoid(THETA_0).toFixed(3)}, learning rate ${LEARNING_RATE}) against the behaviour log-probabilities recorded in the trajectories, then a fixed **${UPDATE_MS} ms sleep standing in for the GPU step** (no CPU used). "Trainer idle" = 1 − (time in updates ÷ wall time): the GPU-idle fraction of such a system.
- **Final reward**: σ(θ) of the final policy (its exact success probability) and the mean reward of the last two trained batches.

${table}

AReaL (arXiv:2505.24298) reports 2.77× the throughput of synchronous training at equal quality for fully asynchronous training with bounded staleness. Here, in episodes/hour, max_staleness 4 gives ${rowOf(4) ? ratio(rowOf(4) as Row) : '—'} that of max_staleness 0 (1: ${rowOf(1) ? ratio(rowOf(1) as Row) : '—'}, 2: ${rowOf(2) ? ratio(rowOf(2) as Row) : '—'}); at equal quality (wall time until the policy first succeeds with probability ≥ ${TARGET_SUCCESS}) the ratios are ${rowOf(4) ? qualityRatio(rowOf(4) as Row) : '—'} (1: ${rowOf(1) ? qualityRatio(rowOf(1) as Row) : '—'}, 2: ${rowOf(2) ? qualityRatio(rowOf(2) as Row) : '—'}). For the same number of episodes the asynchronous runs end with a worse policy: stale samples give smaller (clipped) steps, so more of them are needed for the same gain, which this toy learner shows plainly. The max staleness observed can exceed max_staleness: admission bounds the groups admitted, and a group whose episode sits in the long tail is trained late, with its recorded behaviour log-probabilities (docs/async-rl.md, "Admission control").

The two figures are not the same measurement: AReaL's is GPU clusters generating long reasoning traces with real LLM updates; ours is a synthetic workload whose shape (long-tailed turn times, a fixed-time update) is what makes the synchronous schedule wait, on ${cpus().length} shared cores. What transfers is the mechanism: with S = 0 a batch waits for its slowest episode and the rollout slots idle during the update; with S > 0 admission keeps the slots busy and the update overlaps generation.
`;
bench.write({
  title: 'bench:async — asynchronous vs synchronous training on the distributed path',
  body: [md],
  data: { totalSeconds: totalS, settings: { EPISODES, GROUP_SIZE, GROUPS_PER_BATCH, WORKER_CONCURRENCY, TURN_MEDIAN_MS, TURN_SIGMA, UPDATE_MS, THETA_0, LEARNING_RATE, CLIP_EPSILON, SEED }, rows: rows.map(({ runDir: _runDir, ...row }) => row) },
});
process.exit(0);
