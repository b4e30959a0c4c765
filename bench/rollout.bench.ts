/**
 * bench:rollout: end-to-end episodes/s of the distributed rollout with the
 * oracle policy on the built-in dataset, against the same episodes played in
 * one process without any queue.
 *
 *   npm run bench:rollout        (REDIS_URL, default redis://127.0.0.1:6379; BENCH_EPISODES, default 800; BENCH_REPEATS, default 3)
 *
 * Rows:
 * - direct: one process, `concurrency` episodes in flight, playEpisode on the
 *   runtime — no transport, no Redis (the baseline);
 * - in-process transport: coordinator + worker + trainer in one process (what `sqlenv train` runs);
 * - BullMQ alone: the same flows with no-op processors (the queue's own floor on this machine);
 * - BullMQ with 1, 2 and 4 worker processes (apps/worker/src/main.ts), coordinator and
 *   trainer in this process. Each configuration first plays a warm-up run so the
 *   workers' dataset load, executor start-up and JIT warm-up are not timed, and the
 *   clock starts once every worker has attached to the timed run.
 * Queue overhead per episode = 1000 × (1/rate(BullMQ, 1 worker) − 1/rate(direct)) ms at the
 * same in-flight count. The BullMQ rows also report Redis commands per episode and CPU ms per
 * episode by component (worker process trees, this process, the Redis server): on a shared
 * machine those move far less than episodes/s. Writes <results dir>/rollout.md and .json.
 *
 *   BENCH_EPISODES=40 BENCH_WARMUP_EPISODES=8 BENCH_REPEATS=1 BENCH_WORKERS=1 BENCH_RESULTS_DIR=/tmp/r npm run bench:rollout   (smallest)
 *
 * Profiling knobs (send partial runs elsewhere with BENCH_RESULTS_DIR):
 *   BENCH_CONFIGS=direct,inproc,floor,bullmq   BENCH_WORKERS=1,2,4   BENCH_TRACE=1 (admission/batch timeline)
 *   BENCH_EXECUTOR_POOL_SIZE=1|N|default       BENCH_WORKER_NODE_ARGS='--cpu-prof --cpu-prof-dir=/tmp/prof'
 * For exact command counts and server CPU, point REDIS_URL at a private redis-server.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { FlowProducer, Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { OraclePolicy } from '@sqlenv/agents';
import { RolloutRunSpecSchema, type RolloutRunSpec } from '@sqlenv/protocol';
import {
  BullmqTransport,
  buildGroup,
  InProcessTransport,
  playEpisode,
  QuestionSchedule,
  RolloutWorker,
  runCoordinator,
  runTrainer,
  scheduledQuestions,
  StatsPolicyUpdater,
  type Transport,
} from '@sqlenv/rollout';
import { createSqlEnvRuntime } from '@sqlenv/sql-env';
import { deleteKeysUnder } from '@sqlenv/rollout/testing';
import { startBench } from './lib/harness.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const redisUrl = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const episodes = Number(process.env['BENCH_EPISODES'] ?? 800);
/** Warm-up episodes per process before each timed run: enough for the JIT to settle, not just for start-up. */
const warmupEpisodes = Number(process.env['BENCH_WARMUP_EPISODES'] ?? 400);
/** Episodes in flight per worker process (and in the direct baseline). */
const concurrency = 16;
const workerCounts = (process.env['BENCH_WORKERS'] ?? '1,2,4').split(',').map(Number);
/** Timed runs per configuration; the row is the median run (by episodes/s), with the range beside it. */
const repeats = Number(process.env['BENCH_REPEATS'] ?? 3);
/** Which rows to run (comma-separated): direct, inproc, floor, bullmq. */
const configs = new Set((process.env['BENCH_CONFIGS'] ?? 'direct,inproc,floor,bullmq').split(','));
/**
 * SQL executor children per worker process. 1 by default: with 4 worker processes on 2 cores, the
 * executor's default (2 + a spare per process) puts 12 SQLite children next to 4 Node processes
 * (measured on par with 1 each, within the noise of a shared machine: 379 vs 395 episodes/s
 * medians); BENCH_EXECUTOR_POOL_SIZE=default keeps the executor's own default.
 */
const workerPoolSizeSetting = process.env['BENCH_EXECUTOR_POOL_SIZE'] ?? '1';
const workerPoolSize = workerPoolSizeSetting === 'default' ? undefined : workerPoolSizeSetting;

interface Row {
  name: string;
  workers: number;
  episodes: number;
  seconds: number;
  episodesPerSecond: number;
  /** episodes/s of every timed run of this configuration (the row shows the median one). */
  runsEpisodesPerSecond?: number[];
  /** Redis commands per episode during the timed run (all clients, commands inside Lua scripts included), when measured. */
  redisCommandsPerEpisode?: number;
  /** CPU milliseconds per episode during the timed run: worker processes (with their SQL executor children), this process (coordinator + trainer), Redis. */
  cpuMsPerEpisode?: { workers: number; coordinatorTrainer: number; redis: number };
}

/** CPU time (user + system) of a process and all its live descendants, in milliseconds (Linux /proc; 0 elsewhere). */
async function processTreeCpuMs(rootPid: number): Promise<number> {
  let entries: string[];
  try {
    entries = await readdir('/proc');
  } catch {
    return 0;
  }
  const stats = new Map<number, { ppid: number; ticks: number }>();
  await Promise.all(
    entries.filter((e) => /^\d+$/.test(e)).map(async (pid) => {
      try {
        const text = await readFile(`/proc/${pid}/stat`, 'utf8');
        // Fields after the parenthesised command name: state ppid ... utime(14) stime(15).
        const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
        stats.set(Number(pid), { ppid: Number(fields[1]), ticks: Number(fields[11]) + Number(fields[12]) });
      } catch {
        // The process exited while we looked.
      }
    }),
  );
  let ticks = 0;
  const frontier = [rootPid];
  while (frontier.length > 0) {
    const pid = frontier.pop() as number;
    ticks += stats.get(pid)?.ticks ?? 0;
    for (const [child, stat] of stats) if (stat.ppid === pid) frontier.push(child);
  }
  return ticks * 10; // USER_HZ is 100 on Linux.
}

/** Redis server CPU (user + system) so far, in milliseconds. */
async function redisCpuMs(): Promise<number> {
  const redis = new Redis(redisUrl);
  try {
    const info = await redis.info('cpu');
    const read = (name: string): number => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? 0);
    return (read('used_cpu_user') + read('used_cpu_sys')) * 1000;
  } finally {
    await redis.quit();
  }
}

/** Total commands Redis has processed so far (INFO commandstats), to count commands per episode. */
async function redisCommandCount(): Promise<number> {
  const redis = new Redis(redisUrl);
  try {
    const info = await redis.info('commandstats');
    let total = 0;
    for (const match of info.matchAll(/calls=(\d+)/g)) total += Number(match[1]);
    return total;
  } finally {
    await redis.quit();
  }
}

/** The median of `repeats` timed runs, with every run's rate recorded. */
async function medianOf(run: () => Promise<Row>): Promise<Row> {
  const runs: Row[] = [];
  for (let i = 0; i < repeats; i++) runs.push(await run());
  const sorted = [...runs].sort((a, b) => a.episodesPerSecond - b.episodesPerSecond);
  const median = sorted[Math.floor((sorted.length - 1) / 2)] as Row;
  return { ...median, runsEpisodesPerSecond: runs.map((r) => r.episodesPerSecond) };
}

function spec(runId: string, n: number): RolloutRunSpec {
  // Staleness bound wide open and groups trained (not dropped): the bench measures the queue, not admission waits.
  return RolloutRunSpecSchema.parse({ run_id: runId, policy: 'oracle', episodes: n, group_size: 4, groups_per_batch: 8, max_staleness: 1_000, drop_zero_variance: false });
}

const runtime = await createSqlEnvRuntime({ dataset: 'builtin' });
const questions = scheduledQuestions(runtime.dataset, 'train');
const policy = new OraclePolicy(runtime.dataset);
const rows: Row[] = [];

async function direct(n: number): Promise<Row> {
  const s = spec(`direct-${randomBytes(3).toString('hex')}`, n);
  const schedule = new QuestionSchedule(questions, s.seed);
  const jobs = Array.from({ length: n / s.group_size }, (_, seq) => buildGroup(s, schedule, seq, 0).episodes).flat();
  const cpuBefore = await processTreeCpuMs(process.pid);
  const started = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < jobs.length) {
        const job = jobs[next++];
        if (job) await playEpisode(job, { attempt: 1, queueWaitMs: 0 }, { environments: { create: () => runtime.createEnvironment() }, policy, currentVersion: () => 0, workerId: 'direct', maxTurns: 40 });
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const cpuMs = ((await processTreeCpuMs(process.pid)) - cpuBefore) / n;
  return { name: 'direct (no queue, one process)', workers: 1, episodes: n, seconds, episodesPerSecond: n / seconds, cpuMsPerEpisode: { workers: cpuMs, coordinatorTrainer: 0, redis: 0 } };
}

async function coordinated(transport: Transport, trainerTransport: Transport, runId: string, n: number): Promise<number> {
  const s = spec(runId, n);
  await transport.registerRun(s);
  const t0 = performance.now();
  let lastAdmitMs = 0;
  const batchMs: number[] = [];
  const trainer = runTrainer({ transport: trainerTransport, runId, updater: new StatsPolicyUpdater(), pollMs: 50, runWaitMs: 10_000, onBatch: () => batchMs.push(performance.now() - t0) });
  const summary = await runCoordinator({ transport, spec: s, questions, pollMs: 50, onAdmit: () => (lastAdmitMs = performance.now() - t0) });
  await trainer;
  if (process.env['BENCH_TRACE'] !== undefined) process.stderr.write(`    ${runId}: all admitted at ${lastAdmitMs.toFixed(0)} ms, batches at ${batchMs.map((x) => x.toFixed(0)).join(' ')}, done at ${(performance.now() - t0).toFixed(0)} ms\n`);
  if (summary.episodes_consumed !== n || summary.lost_episodes !== 0 || summary.duplicate_trajectories !== 0) throw new Error(`run ${runId} incomplete: ${JSON.stringify(summary)}`);
  return summary.elapsed_s;
}

async function inProcess(n: number): Promise<Row> {
  const transport = new InProcessTransport();
  const worker = new RolloutWorker({ transport, resolveRun: () => Promise.resolve({ policy, environments: { create: () => runtime.createEnvironment() } }), concurrency, workerId: 'embedded', discoveryMs: 20 });
  await worker.start();
  try {
    await coordinated(transport, transport, `warm-${randomBytes(3).toString('hex')}`, warmupEpisodes);
    return await medianOf(async () => {
      const seconds = await coordinated(transport, transport, `inproc-${randomBytes(3).toString('hex')}`, n);
      return { name: 'in-process transport (sqlenv train)', workers: 1, episodes: n, seconds, episodesPerSecond: n / seconds };
    });
  } finally {
    await worker.close();
    await transport.close();
  }
}

/** BullMQ's own cost: the same flows (group + 4 children) with no-op processors, all in this process. */
async function bullmqFloor(n: number): Promise<Row> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
  const prefix = `bench-floor-${randomBytes(4).toString('hex')}`;
  const flows = new FlowProducer({ connection: redis });
  let groupsDone = 0;
  let episodesWorker: Worker | undefined;
  let groupsWorker: Worker | undefined;
  const started = performance.now();
  const finished = new Promise<void>((resolve) => {
    episodesWorker = new Worker('episodes', () => Promise.resolve({ ok: true }), { connection: redis, prefix, concurrency });
    groupsWorker = new Worker('groups', () => {
      if (++groupsDone >= n / 4) resolve();
      return Promise.resolve(true);
    }, { connection: redis, prefix, concurrency: 8 });
  });
  // Added 16 groups per MULTI, like the transport's admission.
  for (let first = 0; first < n / 4; first += 16) {
    await flows.addBulk(
      Array.from({ length: Math.min(16, n / 4 - first) }, (_, j) => {
        const k = first + j;
        return {
          name: 'group', queueName: 'groups', prefix, data: { k }, opts: { jobId: `g${k}` },
          children: Array.from({ length: 4 }, (_, i) => ({ name: 'episode', queueName: 'episodes', prefix, data: { k, i }, opts: { jobId: `g${k}.e${i}`, failParentOnFailure: true } })),
        };
      }),
    );
  }
  await finished;
  const seconds = (performance.now() - started) / 1000;
  await episodesWorker?.close();
  await groupsWorker?.close();
  await flows.close();
  const keys = await redis.keys(`${prefix}:*`);
  if (keys.length > 0) await redis.del(...keys);
  await redis.quit();
  return { name: 'BullMQ alone: same flows, no-op processors, one process', workers: 1, episodes: n, seconds, episodesPerSecond: n / seconds };
}

function startWorker(keyBase: string, i: number): ChildProcess {
  const poolSize = workerPoolSize === undefined ? [] : ['--executor-pool-size', workerPoolSize];
  return fork(join(root, 'apps', 'worker', 'src', 'main.ts'), ['--redis', redisUrl, '--key-base', keyBase, '--concurrency', String(concurrency), '--worker-id', `bench-${i}`, '--discovery-ms', '100', ...poolSize], {
    // BENCH_WORKER_NODE_ARGS, e.g. '--cpu-prof --cpu-prof-dir=/tmp/prof', profiles the workers.
    execArgv: ['--import', 'tsx', ...(process.env['BENCH_WORKER_NODE_ARGS'] ?? '').split(' ').filter((a) => a !== '')],
    env: { ...process.env, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
}

async function bullmq(workers: number, n: number): Promise<Row> {
  const keyBase = `bench-${randomBytes(4).toString('hex')}`;
  const transport = new BullmqTransport({ redisUrl, keyBase });
  const trainerTransport = new BullmqTransport({ redisUrl, keyBase });
  const children = Array.from({ length: workers }, (_, i) => startWorker(keyBase, i));
  try {
    await coordinated(transport, trainerTransport, `warm-${randomBytes(3).toString('hex')}`, warmupEpisodes * workers);
    return await medianOf(async () => {
      const runId = `bench-${randomBytes(3).toString('hex')}`;
      const queue = new Queue('episodes', { connection: { url: redisUrl }, prefix: `${keyBase}:{${runId}}` });
      // Register the run and start the clock once every worker has found it (the workers' discovery
      // latency is a start-up cost, not throughput; the coordinator's later registration is a no-op).
      await transport.registerRun(spec(runId, n));
      const deadline = performance.now() + 30_000;
      const waitStarted = performance.now();
      while ((await queue.getWorkersCount()) < workers && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      if (process.env['BENCH_TRACE'] !== undefined) process.stderr.write(`    ${runId}: ${await queue.getWorkersCount()} workers attached after ${(performance.now() - waitStarted).toFixed(0)} ms\n`);
      const cpu = async (): Promise<[number, number, number]> => {
        const own = process.cpuUsage();
        const workerMs = (await Promise.all(children.map((c) => (c.pid === undefined ? 0 : processTreeCpuMs(c.pid))))).reduce((a, b) => a + b, 0);
        return [workerMs, (own.user + own.system) / 1000, await redisCpuMs()];
      };
      const commandsBefore = await redisCommandCount();
      const cpuBefore = await cpu();
      const seconds = await coordinated(transport, trainerTransport, runId, n);
      await queue.close();
      const cpuAfter = await cpu();
      // Includes the idle workers' polling and this count's own INFO call: a small overestimate.
      const redisCommandsPerEpisode = ((await redisCommandCount()) - commandsBefore) / n;
      const perEpisode = (i: number): number => ((cpuAfter[i] ?? 0) - (cpuBefore[i] ?? 0)) / n;
      return {
        name: `BullMQ, ${workers} worker process${workers > 1 ? 'es' : ''}`,
        workers,
        episodes: n,
        seconds,
        episodesPerSecond: n / seconds,
        redisCommandsPerEpisode,
        cpuMsPerEpisode: { workers: perEpisode(0), coordinatorTrainer: perEpisode(1), redis: perEpisode(2) },
      };
    });
  } finally {
    for (const child of children) child.kill('SIGTERM');
    await Promise.all(children.map((c) => new Promise((resolve) => (c.exitCode !== null ? resolve(null) : c.once('exit', resolve)))));
    await transport.close();
    await trainerTransport.close();
    const redis = new Redis(redisUrl);
    await deleteKeysUnder(redis, keyBase);
    await redis.quit();
  }
}

const bench = startBench('rollout');
process.stderr.write(`bench:rollout: ${episodes} oracle episodes per configuration, ${concurrency} in flight per process\n`);
const report = (row: Row): void => {
  rows.push(row);
  const commands = row.redisCommandsPerEpisode === undefined ? '' : `, ${row.redisCommandsPerEpisode.toFixed(1)} Redis commands/episode`;
  const cpu = row.cpuMsPerEpisode;
  const cpuText = cpu === undefined ? '' : `, CPU ms/episode: workers ${cpu.workers.toFixed(2)}, coordinator+trainer ${cpu.coordinatorTrainer.toFixed(2)}, redis ${cpu.redis.toFixed(2)}`;
  const range = row.runsEpisodesPerSecond === undefined ? '' : ` (runs: ${row.runsEpisodesPerSecond.map((r) => r.toFixed(0)).join(', ')})`;
  process.stderr.write(`  ${row.name}: ${row.episodesPerSecond.toFixed(1)} episodes/s${range}${commands}${cpuText}\n`);
};
if (configs.has('direct')) {
  await direct(warmupEpisodes);
  report(await medianOf(() => direct(episodes)));
}
if (configs.has('inproc')) report(await inProcess(episodes));
if (configs.has('floor')) {
  await bullmqFloor(warmupEpisodes);
  report(await medianOf(() => bullmqFloor(episodes)));
}
if (configs.has('bullmq')) for (const workers of workerCounts) report(await bullmq(workers, episodes));
await runtime.close();

const directRate = rows.find((r) => r.name.startsWith('direct'))?.episodesPerSecond ?? 0;
const oneWorker = rows.find((r) => r.name.startsWith('BullMQ, 1 '));
const inProcessRow = rows.find((r) => r.name.startsWith('in-process'));
const overheadMs = (rate: number | undefined): number | null => (rate === undefined || directRate === 0 ? null : 1000 * (1 / rate - 1 / directRate));
const result = {
  episodesPerConfiguration: episodes,
  concurrencyPerProcess: concurrency,
  rows,
  queueOverheadMsPerEpisode: overheadMs(oneWorker?.episodesPerSecond),
  inProcessOverheadMsPerEpisode: overheadMs(inProcessRow?.episodesPerSecond),
  targets: { episodesPerSecondWith4Workers: 300, queueOverheadMsPerEpisode: 3 },
};

const fmt = (x: number | null): string => (x === null ? '—' : x.toFixed(2));
const md = [
  `The machine is shared: other jobs ran at the same time. Oracle policy on the built-in dataset, ${episodes} episodes per timed run (groups of 4), ${concurrency} episodes in flight per process; every run checked complete (0 lost, 0 duplicated). A ${warmupEpisodes}-episode warm-up run per process precedes the timed runs, and the clock starts once every worker process has attached to the run. Worker processes run ${workerPoolSize ?? 'the default number of'} SQL executor child${workerPoolSize === '1' ? '' : 'ren'} each. Each row is the median of ${repeats} timed runs (all runs listed).`,
  '',
  '| configuration | worker processes | episodes | seconds | episodes/s | runs (episodes/s) | × direct | Redis commands/episode |',
  '| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: |',
  ...rows.map(
    (r) =>
      `| ${r.name} | ${r.workers} | ${r.episodes} | ${r.seconds.toFixed(2)} | ${r.episodesPerSecond.toFixed(1)} | ${(r.runsEpisodesPerSecond ?? []).map((x) => x.toFixed(0)).join(', ')} | ${(r.episodesPerSecond / directRate).toFixed(2)} | ${r.redisCommandsPerEpisode === undefined ? '—' : r.redisCommandsPerEpisode.toFixed(1)} |`,
  ),
  '',
  `Queue overhead per episode (BullMQ, 1 worker vs direct, same in-flight count): **${fmt(result.queueOverheadMsPerEpisode)} ms**. In-process transport overhead: ${fmt(result.inProcessOverheadMsPerEpisode)} ms.`,
  '',
  `CPU ms per episode of the median run (/proc for the worker process trees with their SQL executor children, Redis INFO for the server at ${new URL(redisUrl).host}; other clients of the same Redis count too, as they do in the command counts, which include commands run inside Lua scripts). On a shared machine these move much less than episodes/s:`,
  '',
  '| configuration | workers | coordinator + trainer | Redis | total |',
  '| --- | ---: | ---: | ---: | ---: |',
  ...rows.flatMap((r) => {
    const c = r.cpuMsPerEpisode;
    return c === undefined ? [] : [`| ${r.name} | ${c.workers.toFixed(2)} | ${c.coordinatorTrainer.toFixed(2)} | ${c.redis.toFixed(2)} | ${(c.workers + c.coordinatorTrainer + c.redis).toFixed(2)} |`];
  }),
  '',
  `Targets: ≥ 300 episodes/s with 4 workers, ≤ 3 ms queue overhead per episode.`,
  '',
];
bench.write({ title: 'bench:rollout — distributed rollout throughput', body: md, data: result });
process.stdout.write(md.join('\n'));
