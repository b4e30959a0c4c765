/**
 * Throughput of the SQL sandbox executor vs running the same prepared
 * statement in-process with better-sqlite3.
 *
 *   SPIDER_DIR=... npm run bench:sql -- [--seconds 3] [--pool 2] [--depth 16]
 *   BENCH_RESULTS_DIR=/tmp/r npm run bench:sql -- --seconds 0.2   (smallest)
 *
 * Uses Spider's activity_1 database when SPIDER_DIR is set, else a small
 * generated database in a temp dir. Writes <results dir>/sql-executor.md and .json.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { QueryRunner, QueryLimitsSchema, SqlExecutor } from '@sqlenv/sql-env';
import { startBench } from './lib/harness.ts';

const { values: args } = parseArgs({ options: { seconds: { type: 'string', default: '3' }, pool: { type: 'string', default: '2' }, depth: { type: 'string', default: '16' } } });
const seconds = Number(args.seconds);
const poolSize = Number(args.pool);
const pipelineDepth = Number(args.depth);
const bench = startBench('sql-executor');

function target(): { dbPath: string; queries: string[]; label: string; cleanup: () => void } {
  const spider = process.env.SPIDER_DIR;
  if (spider !== undefined && spider !== '') {
    return {
      dbPath: join(spider, 'database', 'activity_1', 'activity_1.sqlite'),
      queries: ['SELECT Fname, Age FROM Student WHERE StuID = 1001', 'SELECT count(*) FROM Student', 'SELECT Fname, LName FROM Student WHERE Age > 20 ORDER BY LName LIMIT 5'],
      label: 'Spider activity_1',
      cleanup: () => {},
    };
  }
  const dir = mkdtempSync(join(tmpdir(), 'sql-executor-bench-'));
  const dbPath = join(dir, 'bench.sqlite');
  const db = new Database(dbPath);
  db.exec('CREATE TABLE person (id INTEGER PRIMARY KEY, name TEXT, age INTEGER)');
  const insert = db.prepare('INSERT INTO person (name, age) VALUES (?, ?)');
  for (let i = 0; i < 1000; i += 1) insert.run(`name${i}`, 18 + (i % 50));
  db.close();
  return {
    dbPath,
    queries: ['SELECT name, age FROM person WHERE id = 17', 'SELECT count(*) FROM person', 'SELECT name FROM person WHERE age > 60 ORDER BY name LIMIT 5'],
    label: 'generated 1,000-row table',
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

function timeLoop(run: (i: number) => void): number {
  const endMs = performance.now() + seconds * 1000;
  let n = 0;
  while (performance.now() < endMs) {
    for (let k = 0; k < 256; k += 1) run(n + k);
    n += 256;
  }
  return n / seconds;
}

async function timeExecutor(executor: SqlExecutor, dbPath: string, queries: string[], concurrency: number): Promise<{ qps: number; parentCpuUsPerQuery: number }> {
  const endMs = performance.now() + seconds * 1000;
  let n = 0;
  const cpu0 = process.cpuUsage();
  const lane = async (lane: number): Promise<void> => {
    for (let i = lane; performance.now() < endMs; i += concurrency) {
      await executor.query(dbPath, queries[i % queries.length] as string, { maxRows: 20 });
      n += 1;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, (_, i) => lane(i)));
  const cpu = process.cpuUsage(cpu0);
  return { qps: n / seconds, parentCpuUsPerQuery: (cpu.user + cpu.system) / n };
}

const { dbPath, queries, label, cleanup } = target();
const raw = new Database(dbPath, { readonly: true, fileMustExist: true });
const prepared = queries.map((q) => raw.prepare(q).raw(true));
const directQps = timeLoop((i) => prepared[i % prepared.length]?.all());
raw.close();
const runner = new QueryRunner(QueryLimitsSchema.parse({}));
const runnerQps = timeLoop((i) => runner.run(dbPath, queries[i % queries.length] as string, 20));
runner.close();

// The child-process path only: the in-process fast path (on by default) is measured by bench:env.
const executor = new SqlExecutor({ poolSize, pipelineDepth, inProcessMaxMs: 0 });
await executor.whenReady();
await Promise.all(Array.from({ length: poolSize * 4 }, (_, i) => executor.query(dbPath, queries[i % queries.length] as string)));
const rows: { concurrency: number; qps: number; parentCpuUsPerQuery: number }[] = [];
for (const concurrency of [1, 4, 16, 64, 256]) rows.push({ concurrency, ...(await timeExecutor(executor, dbPath, queries, concurrency)) });
await executor.close();
cleanup();

const report = [
  `The cores are shared with other work. Database: ${label}.`,
  `Executor: ${poolSize} child processes, pipeline depth ${pipelineDepth}, in-process fast path off (every query through a child). ${seconds} s per measurement; queries rotate over ${queries.length} simple SELECTs (maxRows 20).`,
  '',
  `- better-sqlite3 in-process, same prepared statements, \`.raw().all()\`: **${Math.round(directQps).toLocaleString('en-US')} queries/s**`,
  `- QueryRunner in-process (statement cache, capped fetch, cell conversion; no timeout): **${Math.round(runnerQps).toLocaleString('en-US')} queries/s**`,
  '',
  '| concurrent queries | executor queries/s | slowdown vs direct | parent CPU µs/query |',
  '|---:|---:|---:|---:|',
  ...rows.map((r) => `| ${r.concurrency} | ${Math.round(r.qps).toLocaleString('en-US')} | ${(directQps / r.qps).toFixed(1)}× | ${r.parentCpuUsPerQuery.toFixed(1)} |`),
  '',
];
bench.write({ title: 'SQL executor throughput', body: report, data: { database: label, poolSize, pipelineDepth, seconds, directQps, runnerQps, rows } });
process.stdout.write(report.join('\n'));
