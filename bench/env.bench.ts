/**
 * bench:env: throughput of SqlEnvironment steps and memory of open episodes.
 *
 *   npm run bench:env            (SPIDER_DIR set → the Spider subset, else the builtin dataset)
 *
 * Measures, in one run:
 * - dataset load time, cold (empty cache dir) and warm (gold cache present);
 * - DESCRIBE / SAMPLE / QUERY steps per second with many episodes in flight
 *   at once, so the executor pool pipelines (episodes of the default 15-step
 *   budget: a finished one is reset, inside the measured time);
 * - the same queries sent straight to the executor pool (no environment), to
 *   separate the environment's own cost from the sandbox's;
 * - the QUERY steps and executor runs again with the executor's in-process
 *   fast path off (every query through a child process), for comparison;
 * - the same simple SELECTs run directly with better-sqlite3 (a prepared
 *   statement, in-process), and the ratio direct rate ÷ env rate;
 * - RSS with 1,000 concurrent open episodes (each reset, one DESCRIBE and one QUERY done).
 * Writes <results dir>/env.md and env.json.
 *
 *   BENCH_STEPS=2000 BENCH_ROUNDS=1 BENCH_OPEN_EPISODES=50 BENCH_RESULTS_DIR=/tmp/r npm run bench:env   (smallest)
 */
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import Database from 'better-sqlite3';
import type { SqlAction } from '@sqlenv/protocol';
import { createSqlEnvRuntime, quoteIdentifier, type SqlEnvRuntime, type SqlEnvironment } from '@sqlenv/sql-env';
import { benchSettings, positiveInt, startBench } from './lib/harness.ts';

const settings = benchSettings(
  z.object({
    /** Steps per measured action type (after a warm-up of a tenth of it). */
    BENCH_STEPS: positiveInt(60_000),
    /** The QUERY rates and the direct rates are measured this many times, interleaved; the median is reported. */
    BENCH_ROUNDS: positiveInt(3),
    BENCH_OPEN_EPISODES: positiveInt(1_000),
  }),
);
const bench = startBench('env');
const spiderDir = process.env['SPIDER_DIR'];
const datasetSource = spiderDir === undefined || spiderDir === '' ? 'builtin' : spiderDir;
/** Episodes in flight during the step benchmarks. */
const concurrency = 256;
const stepsPerKind = settings.BENCH_STEPS;
const rounds = settings.BENCH_ROUNDS;
const openEpisodes = settings.BENCH_OPEN_EPISODES;

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

interface StepRate {
  kind: string;
  argument: string;
  steps: number;
  seconds: number;
  stepsPerSecond: number;
}

interface Ratio {
  query: string;
  envStepsPerSecond: number;
  executorRunsPerSecond: number;
  directRunsPerSecond: number;
  ratio: number;
  envStepsPerSecondChildOnly: number;
  executorRunsPerSecondChildOnly: number;
  ratioChildOnly: number;
}

interface DirectRate {
  sql: string;
  runs: number;
  seconds: number;
  runsPerSecond: number;
}

async function timeLoad(cacheDir: string): Promise<{ runtime: SqlEnvRuntime; seconds: number }> {
  const started = performance.now();
  const runtime = await createSqlEnvRuntime({ dataset: datasetSource, cacheDir });
  return { runtime, seconds: (performance.now() - started) / 1000 };
}

/** `concurrency` episodes each stepping `action` in a loop until `steps` steps are done in total. */
async function measureSteps(runtime: SqlEnvRuntime, questionId: string, kind: string, action: SqlAction, steps: number): Promise<StepRate> {
  const envs: SqlEnvironment[] = [];
  for (let i = 0; i < concurrency; i += 1) {
    const env = runtime.createEnvironment();
    await env.reset({ question_id: questionId });
    envs.push(env);
  }
  let remaining = steps;
  const loop = async (env: SqlEnvironment): Promise<void> => {
    while (remaining > 0) {
      remaining -= 1;
      const outcome = await env.step(action);
      if (outcome.observation.error !== '') throw new Error(`${kind} failed: ${outcome.observation.error}`);
      if (outcome.done) await env.reset({ question_id: questionId });
    }
  };
  const started = performance.now();
  await Promise.all(envs.map(loop));
  const seconds = (performance.now() - started) / 1000;
  for (const env of envs) env.close();
  return { kind, argument: action.argument, steps, seconds, stepsPerSecond: steps / seconds };
}

/** The same query straight through the executor pool, as many in flight as in measureSteps. */
async function measureExecutor(runtime: SqlEnvRuntime, dbPath: string, sql: string, runs: number): Promise<DirectRate> {
  let remaining = runs;
  const loop = async (): Promise<void> => {
    while (remaining > 0) {
      remaining -= 1;
      await runtime.executor.query(dbPath, sql, { maxRows: runtime.config.queryMaxRows, timeoutMs: runtime.config.queryTimeoutMs });
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, loop));
  const seconds = (performance.now() - started) / 1000;
  return { sql, runs, seconds, runsPerSecond: runs / seconds };
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
}

/** Median-rate entry of several measurements of the same thing. */
function medianOf<T extends { seconds: number }>(runs: readonly T[], rate: (r: T) => number): T {
  const target = median(runs.map(rate));
  return runs.find((r) => rate(r) === target) as T;
}

function measureDirect(dbPath: string, sql: string, runs: number): DirectRate {
  const db = new Database(dbPath, { readonly: true, fileMustExist: true });
  const statement = db.prepare(sql).raw(true);
  for (let i = 0; i < runs / 10; i += 1) statement.all();
  const started = performance.now();
  for (let i = 0; i < runs; i += 1) statement.all();
  const seconds = (performance.now() - started) / 1000;
  db.close();
  return { sql, runs, seconds, runsPerSecond: runs / seconds };
}

/** RSS of the executor's child processes (Linux /proc), in bytes; 0 elsewhere. */
async function childrenRssBytes(): Promise<number> {
  let total = 0;
  try {
    for (const pid of await readdir('/proc')) {
      if (!/^\d+$/.test(pid)) continue;
      const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
      if (!new RegExp(`^PPid:\\s+${process.pid}$`, 'm').test(status)) continue;
      const rss = /^VmRSS:\s+(\d+) kB$/m.exec(status);
      total += Number(rss?.[1] ?? 0) * 1024;
    }
  } catch {
    return 0;
  }
  return total;
}

async function measureOpenEpisodes(runtime: SqlEnvRuntime, questionIds: readonly string[], queryFor: (dbId: string) => string) {
  gc();
  const before = process.memoryUsage();
  const envs: SqlEnvironment[] = [];
  for (let i = 0; i < openEpisodes; i += 1) envs.push(runtime.createEnvironment());
  await Promise.all(
    envs.map(async (env, i) => {
      const questionId = questionIds[i % questionIds.length] as string;
      await env.reset({ question_id: questionId });
      const dbId = env.state().db_id as string;
      const table = runtime.dataset.databases.get(dbId)?.tables[0]?.name as string;
      await env.step({ action_type: 'DESCRIBE', argument: table });
      await env.step({ action_type: 'QUERY', argument: queryFor(dbId) });
    }),
  );
  gc();
  const after = process.memoryUsage();
  const result = {
    episodes: openEpisodes,
    rssBytes: after.rss,
    rssDeltaBytes: after.rss - before.rss,
    heapUsedDeltaBytes: after.heapUsed - before.heapUsed,
    executorChildrenRssBytes: await childrenRssBytes(),
  };
  for (const env of envs) env.close();
  return result;
}

const mib = (bytes: number): string => (bytes / 1024 / 1024).toFixed(1);

async function main(): Promise<void> {
  const cacheDir = await mkdtemp(join(tmpdir(), 'sqlenv-bench-'));
  try {
    const cold = await timeLoad(cacheDir);
    await cold.runtime.close();
    const { runtime, seconds: warmSeconds } = await timeLoad(cacheDir);
    try {
      const dataset = runtime.dataset;
      // The database with the most playable questions, its largest-but-one table: a typical episode.
      const counts = new Map<string, number>();
      for (const q of dataset.questions) counts.set(q.database_name, (counts.get(q.database_name) ?? 0) + 1);
      const dbId = [...counts].sort((a, b) => b[1] - a[1])[0]?.[0] as string;
      const db = dataset.databases.get(dbId);
      if (db === undefined) throw new Error('no database');
      const table = [...db.tables].sort((a, b) => b.rowCount - a.rowCount)[Math.min(1, db.tables.length - 1)];
      if (table === undefined) throw new Error('no table');
      const question = dataset.questions.find((q) => q.database_name === dbId);
      if (question === undefined) throw new Error('no question');
      const quoted = quoteIdentifier(table.name);
      const countSql = `SELECT count(*) FROM ${quoted}`;
      const rowsSql = `SELECT * FROM ${quoted} LIMIT 20`;

      const warmup = Math.round(stepsPerKind / 10);
      const rates: StepRate[] = [];
      for (const [kind, action] of [
        ['DESCRIBE', { action_type: 'DESCRIBE', argument: table.name }],
        ['SAMPLE', { action_type: 'SAMPLE', argument: table.name }],
      ] as const) {
        await measureSteps(runtime, question.question_id, kind, action, warmup);
        rates.push(await measureSteps(runtime, question.question_id, kind, action, stepsPerKind));
      }
      // The same QUERY steps with the fast path off: a second runtime on the same (warm) cache.
      const childOnly = await createSqlEnvRuntime({ dataset: datasetSource, cacheDir, executor: { inProcessMaxMs: 0 } });
      const queries = [
        { label: 'count(*)', sql: countSql, directRuns: 200_000 },
        { label: '20 rows', sql: rowsSql, directRuns: 100_000 },
      ];
      const ratios = [];
      try {
        await childOnly.executor.whenReady();
        for (const { label, sql, directRuns } of queries) {
          const action = { action_type: 'QUERY', argument: sql } as const;
          const kind = `QUERY ${label}`;
          for (const r of [runtime, childOnly]) {
            await measureSteps(r, question.question_id, kind, action, warmup);
            await measureExecutor(r, db.path, sql, warmup);
          }
          const env: StepRate[] = [];
          const envOff: StepRate[] = [];
          const exec: DirectRate[] = [];
          const execOff: DirectRate[] = [];
          const direct: DirectRate[] = [];
          for (let round = 0; round < rounds; round += 1) {
            env.push(await measureSteps(runtime, question.question_id, kind, action, stepsPerKind));
            envOff.push(await measureSteps(childOnly, question.question_id, kind, action, stepsPerKind));
            exec.push(await measureExecutor(runtime, db.path, sql, stepsPerKind));
            execOff.push(await measureExecutor(childOnly, db.path, sql, stepsPerKind));
            direct.push(measureDirect(db.path, sql, directRuns));
          }
          const envRate = medianOf(env, (x) => x.stepsPerSecond);
          rates.push(envRate);
          const directRate = median(direct.map((x) => x.runsPerSecond));
          const envOffRate = median(envOff.map((x) => x.stepsPerSecond));
          ratios.push({
            query: label,
            envStepsPerSecond: envRate.stepsPerSecond,
            executorRunsPerSecond: median(exec.map((x) => x.runsPerSecond)),
            directRunsPerSecond: directRate,
            ratio: directRate / envRate.stepsPerSecond,
            envStepsPerSecondChildOnly: envOffRate,
            executorRunsPerSecondChildOnly: median(execOff.map((x) => x.runsPerSecond)),
            ratioChildOnly: directRate / envOffRate,
          });
        }
      } finally {
        await childOnly.close();
      }
      const fastPath = runtime.executor.stats();

      const memory = await measureOpenEpisodes(
        runtime,
        dataset.questions.map((q) => q.question_id),
        (id) => `SELECT count(*) FROM ${quoteIdentifier(dataset.databases.get(id)?.tables[0]?.name ?? 'x')}`,
      );

      const report = {
        dataset: { source: datasetSource === 'builtin' ? 'builtin' : 'SPIDER_DIR', name: dataset.name, questions: dataset.questions.length, failures: dataset.failures.length, databases: dataset.databases.size },
        load: { coldSeconds: cold.seconds, warmSeconds },
        setup: { dbId, table: table.name, tableRows: table.rowCount, concurrency, stepsPerKind, rounds, executorPoolSize: 'default', inProcessMaxMs: runtime.executor.config.inProcessMaxMs },
        rates,
        ratios,
        executorStats: { completedInChildren: fastPath.completed, inProcess: fastPath.inProcess, demoted: fastPath.demoted },
        memory,
      };
      bench.write({ title: 'bench:env: SqlEnvironment throughput and memory', body: renderMarkdown(report), data: report });
      process.stdout.write(renderMarkdown(report).join('\n'));
    } finally {
      await runtime.close();
    }
  } finally {
    await rm(cacheDir, { recursive: true, force: true });
  }
}

function renderMarkdown(r: {
  dataset: { source: string; name: string; questions: number; failures: number; databases: number };
  load: { coldSeconds: number; warmSeconds: number };
  setup: { dbId: string; table: string; tableRows: number; concurrency: number; stepsPerKind: number; rounds: number; inProcessMaxMs: number };
  rates: StepRate[];
  ratios: Ratio[];
  executorStats: { completedInChildren: number; inProcess: number; demoted: number };
  memory: { episodes: number; rssBytes: number; rssDeltaBytes: number; heapUsedDeltaBytes: number; executorChildrenRssBytes: number };
}): string[] {
  return [
    `Dataset: ${r.dataset.name} (${r.dataset.source}): ${r.dataset.questions} playable questions, ${r.dataset.failures} not playable, ${r.dataset.databases} databases.`,
    '',
    '## Dataset load',
    '',
    '| load | seconds |',
    '|---|---:|',
    `| cold (empty cache dir: gold queries run${r.dataset.source === 'builtin' ? ', builtin generated' : ''}) | ${r.load.coldSeconds.toFixed(2)} |`,
    `| warm (gold cache present) | ${r.load.warmSeconds.toFixed(2)} |`,
    '',
    `## Steps per second (${r.setup.concurrency} episodes in flight, 15-step episodes reset when done, ${r.setup.stepsPerKind} steps each kind, database ${r.setup.dbId}, table ${r.setup.table} with ${r.setup.tableRows} rows)`,
    '',
    '| step | argument | steps/s |',
    '|---|---|---:|',
    ...r.rates.map((s) => `| ${s.kind} | \`${s.argument}\` | ${Math.round(s.stepsPerSecond)} |`),
    '',
    '## QUERY step vs the executor alone vs the same prepared statement run directly with better-sqlite3 (in-process, one thread, no timeout)',
    '',
    `Median of ${r.setup.rounds} interleaved rounds each. "Fast path on" is the default: a statement a child already ran to completion within ${r.setup.inProcessMaxMs} ms (and that calls no random or clock function) then runs in the environment's process. "Fast path off" sends every query through a child process (\`inProcessMaxMs: 0\`).`,
    '',
    '| query | env QUERY steps/s | executor.query runs/s | direct runs/s | ratio (direct ÷ env) | env steps/s, fast path off | executor runs/s, fast path off | ratio, fast path off |',
    '|---|---:|---:|---:|---:|---:|---:|---:|',
    ...r.ratios.map(
      (x) =>
        `| ${x.query} | ${Math.round(x.envStepsPerSecond)} | ${Math.round(x.executorRunsPerSecond)} | ${Math.round(x.directRunsPerSecond)} | ${x.ratio.toFixed(2)} | ${Math.round(x.envStepsPerSecondChildOnly)} | ${Math.round(x.executorRunsPerSecondChildOnly)} | ${x.ratioChildOnly.toFixed(2)} |`,
    ),
    '',
    `Queries answered over the whole run with the fast path on: ${r.executorStats.completedInChildren} by a child, ${r.executorStats.inProcess} in-process, ${r.executorStats.demoted} statements demoted.`,
    '',
    `## Memory with ${r.memory.episodes} concurrent open episodes (each reset + DESCRIBE + QUERY)`,
    '',
    '| measure | MiB |',
    '|---|---:|',
    `| process RSS (dataset, schemas, ${r.memory.episodes} episodes) | ${mib(r.memory.rssBytes)} |`,
    `| RSS growth for the episodes | ${mib(r.memory.rssDeltaBytes)} |`,
    `| heap growth for the episodes (after GC) | ${mib(r.memory.heapUsedDeltaBytes)} |`,
    `| executor child processes (separate, all of them) | ${mib(r.memory.executorChildrenRssBytes)} |`,
    '',
  ];
}

await main();
