/**
 * bench:server — the env server under many concurrent OpenEnv sessions.
 *
 * This process runs the server (and owns the dataset); the WebSocket clients
 * run in a forked child process (this same file with `--client`), so client
 * work is not counted in the server's RSS. The clients play oracle episodes
 * (reset to a question, DESCRIBE its gold tables, QUERY the gold SQL, ANSWER
 * the gold answer); this process reads the gold from the dataset and hands
 * the plan to the child.
 *
 * Scenarios:
 *   1. held:    1,000 sessions open at once, each reset once → server RSS (target ≤ 500 MB)
 *   2. active:  256 clients stepping as fast as they can → steps/s (target ≥ 3,000), p50/p99 (target p99 ≤ 50 ms)
 *   3. runaway: as 2, plus one client keeping a never-ending query in flight → p99 must move by < 2x
 *   4. paced:   the 256 clients of 2 sending at a fixed total rate (default 3,000 steps/s, the target
 *               throughput) → p99 at that load; and 5. paced + runaway → its p99 ratio. A closed loop
 *               at saturation has mean latency = clients ÷ throughput by Little's law, whatever the
 *               server does, so the latency target is also read at the target load.
 *   (plus a light run with 32 clients, to show latency when the machine is not saturated)
 *   6. runaways: the 32 light clients with 0, 1, 3 and 6 clients each keeping a never-ending query in
 *               flight → p99 of the quick QUERY steps. Their SQL gets a fresh comment each time, so
 *               every one goes through an executor child (as an agent's new statement would) instead
 *               of the in-process fast path; `--runaways-only` runs just this part and writes it
 *               as server-runaways.md and .json.
 *
 * Dataset: SPIDER_DIR when set, else the builtin dataset. Writes <results dir>/server.md and .json.
 *   BENCH_RESULTS_DIR=/tmp/r npm run bench:server -- --clients 16 --light-clients 4 --held 20 --duration-s 1 --paced-steps-per-s 200   (smallest)
 * Run: npm run bench:server  (options: --clients N --light-clients N --held N --duration-s S --pipeline-depth N --full-parse --paced-steps-per-s N --progress --client-cpu-prof DIR --runaways-only)
 */
import { fork, type ChildProcess } from 'node:child_process';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import WebSocket from 'ws';
import { processCpuMs } from '@sqlenv/shared';
import { createSqlEnvRuntime } from '@sqlenv/sql-env';
import { createEnvServer } from '@sqlenv/env-server';
import { loadAverage1mNow, startBench } from './lib/harness.ts';

/** How long after its window a run may take to finish its last requests before it is reported as stalled. */
const STALL_GRACE_MS = 30_000;
const RUNAWAY_SQL = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c';

interface PlannedEpisode {
  questionId: string;
  tables: string[];
  goldSql: string;
  goldAnswer: string;
}

type Command =
  | { cmd: 'hold'; url: string; sessions: number; plan: PlannedEpisode[] }
  | { cmd: 'release' }
  | { cmd: 'run'; url: string; clients: number; durationMs: number; warmupMs: number; runaways: number; uniqueQueries?: boolean; fullParse: boolean; plan: PlannedEpisode[]; stepsPerS?: number }
  | { cmd: 'exit' };

interface HoldReport {
  opened: number;
  failed: number;
  openMs: number;
}

interface RunReport {
  clients: number;
  /** Offered load of a paced run (steps/s over all clients); undefined for a closed loop. */
  offeredStepsPerS?: number;
  steps: number;
  resets: number;
  episodes: number;
  correct: number;
  errors: number;
  measuredMs: number;
  stepsPerS: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
  /** The run did not end within STALL_GRACE_MS of its window; `unanswered` steps were still waiting (counted with their wait so far). */
  stalled: boolean;
  unanswered: number;
  /** p99 of QUERY steps (through the SQL executor) and of the other steps (DESCRIBE, ANSWER: in process). */
  queryP99Ms: number;
  otherP99Ms: number;
  queryP50Ms: number;
  queryMaxMs: number;
  queryErrors: number;
  runawayQueries: number;
  runawayMeanMs: number | null;
  /** Every reset and step sent during the run, warm-up included (for CPU per request). */
  totalRequests: number;
}

// ---------------------------------------------------------------------------
// Client side (forked child)
// ---------------------------------------------------------------------------

/** What the bench needs from a reply frame. */
interface Reply {
  type: string;
  reward: number | null;
}

/** Set by the server for each run: decode every reply with JSON.parse (a real client's cost) instead of reading type and reward only. */
let fullParse = false;

const REWARD_KEY = Buffer.from('"reward":');

/**
 * The reply's type and reward. By default without parsing the whole frame:
 * the server writes `{"type":…,"data":{"observation":{…},"reward":r,"done":d}}`,
 * and the last unescaped `"reward":` is that top-level key (inside strings
 * a quote is escaped). This keeps the load generator light on the two cores it
 * shares with the server; --full-parse measures with JSON.parse instead.
 */
function readReply(data: Buffer): Reply {
  if (fullParse) {
    const frame = JSON.parse(data.toString('utf8')) as { type: string; data: Record<string, unknown> };
    const reward = frame.data['reward'];
    return { type: frame.type, reward: typeof reward === 'number' ? reward : null };
  }
  const head = data.toString('latin1', 0, 24);
  const type = head.startsWith('{"type":"observation"') ? 'observation' : head.startsWith('{"type":"error"') ? 'error' : head.startsWith('{"type":"state"') ? 'state' : 'other';
  if (type !== 'observation') return { type, reward: null };
  const at = data.lastIndexOf(REWARD_KEY);
  if (at < 0) throw new Error('observation frame without a reward');
  // `"reward":r,"done":d}}` → `{"reward":r,"done":d}`
  const tail = JSON.parse(`{${data.toString('latin1', at, data.length - 1)}`) as { reward: number | null };
  return { type, reward: tail.reward };
}

/** A bare OpenEnv WebSocket session: one outstanding request at a time, light on CPU (see readReply). */
class BenchSession {
  private readonly ws: WebSocket;
  private waiter: { resolve: (reply: Reply) => void; reject: (error: Error) => void } | undefined;

  private constructor(ws: WebSocket) {
    this.ws = ws;
    ws.on('message', (data: Buffer) => {
      const w = this.waiter;
      this.waiter = undefined;
      try {
        w?.resolve(readReply(data));
      } catch (error) {
        w?.reject(error as Error);
      }
    });
    ws.on('close', () => this.waiter?.reject(new Error('closed')));
  }

  static open(url: string): Promise<BenchSession> {
    // A load generator on loopback: an all-zero mask makes masking a no-op (ws then
    // skips the copy) and replies are not UTF-8 validated; the server side is unchanged.
    const ws = new WebSocket(url, { perMessageDeflate: false, skipUTF8Validation: true, generateMask: (mask: Buffer) => void mask.fill(0) });
    const session = new BenchSession(ws);
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(session));
      ws.once('error', reject);
    });
  }

  /** Send one request frame (already JSON text) and wait for its reply. */
  request(text: string): Promise<Reply> {
    return new Promise((resolve, reject) => {
      this.waiter = { resolve, reject };
      this.ws.send(text);
    });
  }

  close(): void {
    this.ws.close();
  }
}

async function openMany(url: string, count: number): Promise<{ sessions: BenchSession[]; failed: number }> {
  const sessions: BenchSession[] = [];
  let failed = 0;
  // Batches keep the accept backlog from overflowing.
  for (let i = 0; i < count; i += 100) {
    const batch = await Promise.allSettled(Array.from({ length: Math.min(100, count - i) }, () => BenchSession.open(url)));
    for (const r of batch) {
      if (r.status === 'fulfilled') sessions.push(r.value);
      else failed += 1;
    }
  }
  return { sessions, failed };
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

async function runClients(command: Extract<Command, { cmd: 'run' }>): Promise<RunReport> {
  fullParse = command.fullParse;
  const { sessions } = await openMany(command.url, command.clients);
  const latencies: number[] = [];
  /** The same latencies split by action: in-process tools (DESCRIBE, ANSWER) vs the SQL executor (QUERY). */
  const queryLatencies: number[] = [];
  const otherLatencies: number[] = [];
  const runawayDurations: number[] = [];
  let steps = 0;
  let resets = 0;
  let episodes = 0;
  let correct = 0;
  let errors = 0;
  let queryErrors = 0;
  let totalRequests = 0;
  const start = performance.now();
  const measureFrom = start + command.warmupMs;
  const stopAt = measureFrom + command.durationMs;

  // Request texts built once: the loop below only sends and times.
  const episodeFrames = command.plan.map((episode) => ({
    reset: JSON.stringify({ type: 'reset', data: { question_id: episode.questionId } }),
    steps: [
      ...episode.tables.map((table) => JSON.stringify({ type: 'step', data: { action_type: 'DESCRIBE', argument: table } })),
      JSON.stringify({ type: 'step', data: { action_type: 'QUERY', argument: episode.goldSql } }),
      JSON.stringify({ type: 'step', data: { action_type: 'ANSWER', argument: episode.goldAnswer } }),
    ],
  }));
  const runawayReset = JSON.stringify({ type: 'reset', data: {} });
  const runawayStep = JSON.stringify({ type: 'step', data: { action_type: 'QUERY', argument: RUNAWAY_SQL } });

  // Paced runs: each client sends its steps on a fixed schedule (offered rate ÷ clients per second, random phase).
  // Latency counts from the scheduled send time, so a server that falls behind is charged for the wait
  // (no coordinated omission: a stalled client does not quietly send less).
  const intervalMs = command.stepsPerS === undefined ? undefined : (command.clients / command.stepsPerS) * 1000;
  const slots = new Map<BenchSession, number>();
  /** Steps sent and not answered yet, per session (to account for them if the run stalls). */
  const outstanding = new Map<BenchSession, { t0: number; isQuery: boolean }>();

  const timed = async (session: BenchSession, frame: string, isQuery: boolean): Promise<Reply> => {
    let t0 = performance.now();
    if (intervalMs !== undefined) {
      const slot = slots.get(session) ?? start + Math.random() * intervalMs;
      slots.set(session, slot + intervalMs);
      if (slot > t0) await new Promise((resolve) => setTimeout(resolve, slot - t0));
      t0 = slot;
    }
    outstanding.set(session, { t0, isQuery });
    const reply = await session.request(frame);
    outstanding.delete(session);
    const t1 = performance.now();
    totalRequests += 1;
    // Every step sent inside the window counts, also one that finishes after it (dropping those would hide the slowest).
    if (t0 >= measureFrom && t0 < stopAt) {
      latencies.push(t1 - t0);
      (isQuery ? queryLatencies : otherLatencies).push(t1 - t0);
      steps += 1;
    }
    if (reply.type === 'error') errors += 1;
    if (isQuery && t0 >= measureFrom && t0 < stopAt && reply.type !== 'observation') queryErrors += 1;
    return reply;
  };

  let queryNumber = 0;
  const lane = async (session: BenchSession, offset: number): Promise<void> => {
    let i = offset;
    while (performance.now() < stopAt) {
      const episode = i % episodeFrames.length;
      const frames = episodeFrames[episode] as (typeof episodeFrames)[number];
      i += 1;
      await session.request(frames.reset);
      resets += 1;
      totalRequests += 1;
      let last: Reply | undefined;
      for (let k = 0; k < frames.steps.length; k += 1) {
        const isQuery = k === frames.steps.length - 2;
        // A fresh comment makes it a statement never seen before: it runs in an executor child, not the fast path.
        const frame = isQuery && command.uniqueQueries === true
          ? JSON.stringify({ type: 'step', data: { action_type: 'QUERY', argument: `${(command.plan[episode] as PlannedEpisode).goldSql} /* q${(queryNumber += 1)} */` } })
          : (frames.steps[k] as string);
        last = await timed(session, frame, isQuery);
      }
      episodes += 1;
      if (last?.type === 'observation' && last.reward !== null && last.reward >= 0.5) correct += 1;
    }
  };

  const runawayLane = async (session: BenchSession): Promise<void> => {
    while (performance.now() < stopAt) {
      await session.request(runawayReset);
      const t0 = performance.now();
      await session.request(runawayStep);
      runawayDurations.push(performance.now() - t0);
    }
  };

  const lanes = sessions.map((s, index) => lane(s, index * 7));
  for (let r = 0; r < command.runaways; r += 1) {
    const runaway = await BenchSession.open(command.url);
    lanes.push(runawayLane(runaway).finally(() => runaway.close()));
  }
  // A run that does not end well after its window (e.g. an executor whose children all hang) is cut off and
  // reported as stalled: its unanswered steps count with the time they had waited, rather than the bench hanging.
  let stallTimer: NodeJS.Timeout | undefined;
  const allDone = Promise.all(lanes).then(() => true);
  // Lanes of a stalled run reject later, when their sockets close: not an error then.
  allDone.catch(() => undefined);
  const finished = await Promise.race([
    allDone,
    new Promise<false>((resolve) => (stallTimer = setTimeout(() => resolve(false), stopAt + STALL_GRACE_MS - performance.now()))),
  ]);
  clearTimeout(stallTimer);
  let unanswered = 0;
  if (!finished) {
    const now = performance.now();
    for (const { t0, isQuery } of outstanding.values()) {
      if (t0 < measureFrom || t0 >= stopAt) continue;
      unanswered += 1;
      latencies.push(now - t0);
      (isQuery ? queryLatencies : otherLatencies).push(now - t0);
    }
  }
  for (const s of sessions) s.close();
  latencies.sort((a, b) => a - b);
  queryLatencies.sort((a, b) => a - b);
  otherLatencies.sort((a, b) => a - b);
  return {
    clients: sessions.length,
    ...(command.stepsPerS === undefined ? {} : { offeredStepsPerS: command.stepsPerS }),
    steps,
    resets,
    episodes,
    correct,
    errors,
    measuredMs: command.durationMs,
    stepsPerS: steps / (command.durationMs / 1000),
    p50Ms: percentile(latencies, 50),
    p90Ms: percentile(latencies, 90),
    p99Ms: percentile(latencies, 99),
    maxMs: latencies[latencies.length - 1] ?? Number.NaN,
    stalled: !finished,
    unanswered,
    queryP99Ms: percentile(queryLatencies, 99),
    otherP99Ms: percentile(otherLatencies, 99),
    queryP50Ms: percentile(queryLatencies, 50),
    queryMaxMs: queryLatencies[queryLatencies.length - 1] ?? Number.NaN,
    queryErrors,
    runawayQueries: runawayDurations.length,
    runawayMeanMs: runawayDurations.length === 0 ? null : runawayDurations.reduce((a, b) => a + b, 0) / runawayDurations.length,
    totalRequests,
  };
}

function clientMain(): void {
  let held: BenchSession[] = [];
  process.on('message', (message: Command) => {
    void (async () => {
      switch (message.cmd) {
        case 'hold': {
          const t0 = performance.now();
          const { sessions, failed } = await openMany(message.url, message.sessions);
          // Every held session has a live episode, as a trainer's would.
          await Promise.all(sessions.map((s, i) => s.request(JSON.stringify({ type: 'reset', data: { question_id: message.plan[i % message.plan.length]?.questionId } }))));
          held = sessions;
          process.send?.({ opened: sessions.length, failed, openMs: performance.now() - t0 } satisfies HoldReport);
          return;
        }
        case 'release':
          for (const s of held) s.close();
          held = [];
          process.send?.({ released: true });
          return;
        case 'run':
          process.send?.(await runClients(message));
          return;
        case 'exit':
          process.exit(0);
      }
    })();
  });
}

// ---------------------------------------------------------------------------
// Server side (this process)
// ---------------------------------------------------------------------------

function ask<T>(child: ChildProcess, command: Command): Promise<T> {
  return new Promise((resolve) => {
    child.once('message', (reply) => resolve(reply as T));
    child.send(command);
  });
}

/** User + system CPU seconds of a process so far (Linux /proc; 0 elsewhere). */
function cpuSeconds(pid: number): number {
  return Math.round((processCpuMs(pid) ?? 0) / 100) / 10;
}

const mb = (bytes: number): number => Math.round((bytes / 1024 / 1024) * 10) / 10;

/** A full GC before each memory reading, so "per session" compares live heaps, not GC timing. */
function collectGarbage(): void {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
}

/** Wait for the server to drop the run's sessions; gives up after `timeoutMs` (a stalled run's sessions cannot drain). */
async function waitForSessions(count: () => number, target: number, timeoutMs = 15_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (count() > target && performance.now() < deadline) await new Promise((r) => setTimeout(r, 50));
}

async function serverMain(): Promise<void> {
  const { values } = parseArgs({
    options: {
      clients: { type: 'string', default: '256' },
      'light-clients': { type: 'string', default: '32' },
      held: { type: 'string', default: '1000' },
      'duration-s': { type: 'string', default: '12' },
      'pipeline-depth': { type: 'string' },
      /** Debugging aid: print executor and server counters to stderr every second. */
      progress: { type: 'boolean', default: false },
      /** Clients decode every reply with JSON.parse, as a real client would (default: type and reward only). */
      'full-parse': { type: 'boolean', default: false },
      /** Offered load of the paced scenarios, in steps/s over all clients (the throughput target). */
      'paced-steps-per-s': { type: 'string', default: '3000' },
      /** Write a V8 CPU profile of the client process into this directory (profile the server with node --cpu-prof). */
      'client-cpu-prof': { type: 'string' },
      /** Run only the runaway series (scenario 6), written as server-runaways.md and .json. */
      'runaways-only': { type: 'boolean', default: false },
    },
  });
  const clients = Number(values.clients);
  const lightClients = Number(values['light-clients']);
  const heldTarget = Number(values.held);
  const durationMs = Number(values['duration-s']) * 1000;
  const warmupMs = 2_000;
  const fullParse = values['full-parse'];
  const pacedStepsPerS = Number(values['paced-steps-per-s']);
  const bench = startBench(values['runaways-only'] ? 'server-runaways' : 'server');
  const dataset = process.env['SPIDER_DIR'] ?? 'builtin';

  const pipelineDepth = values['pipeline-depth'] === undefined ? undefined : Number(values['pipeline-depth']);
  const runtime = await createSqlEnvRuntime({
    dataset,
    cacheDir: join(tmpdir(), 'sqlenv-bench-cache'),
    ...(pipelineDepth === undefined ? {} : { executor: { pipelineDepth } }),
  });
  const plan: PlannedEpisode[] = runtime.dataset.questions
    .filter((q) => q.tables_involved.length > 0)
    .map((q) => ({ questionId: q.question_id, tables: [...q.tables_involved], goldSql: q.gold_sql, goldAnswer: q.gold_answer }));
  const server = createEnvServer({ runtime, maxSessions: heldTarget + clients + 16, defaultMetrics: false });
  const address = await server.listen(0, '127.0.0.1');
  const url = `ws://127.0.0.1:${address.port}/ws`;
  const clientProfile = values['client-cpu-prof'] === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${values['client-cpu-prof']}`];
  const child = fork(new URL(import.meta.url).pathname, ['--client'], { execArgv: ['--import', 'tsx', ...clientProfile] });
  if (values.progress) {
    setInterval(() => {
      const cpu = [process.pid, child.pid ?? 0, ...runtime.executor.childPids()].map(cpuSeconds);
      process.stderr.write(`${new Date().toISOString()} sessions=${server.sessionCount()} executor=${JSON.stringify(runtime.executor.stats())} cpu_s(server,client,children)=${cpu.join(',')}\n`);
    }, 1_000).unref();
  }
  process.stderr.write(`bench:server dataset=${runtime.dataset.name} (${runtime.dataset.questions.length} questions, ${plan.length} in plan) url=${url}\n`);
  const series = (): Promise<RunawaySeries> => runawaySeries({ child, url, clients: lightClients, durationMs, warmupMs, fullParse, plan, runtime, sessions: () => server.sessionCount() });

  if (values['runaways-only']) {
    const result = await series();
    child.send({ cmd: 'exit' } satisfies Command);
    await server.close();
    await runtime.close();
    const section = renderRunawaySection(result);
    bench.write({ title: 'bench:server — quick queries with runaway queries in flight', body: [section], data: { ...result } });
    process.stdout.write(`${section}\n`);
    return;
  }

  collectGarbage();
  const rssIdleBytes = process.memoryUsage().rss;
  const heapIdleBytes = process.memoryUsage().heapUsed;
  process.stderr.write(`holding ${heldTarget} sessions...\n`);
  const hold = await ask<HoldReport>(child, { cmd: 'hold', url, sessions: heldTarget, plan });
  collectGarbage();
  const rssHeldBytes = process.memoryUsage().rss;
  const heapHeldBytes = process.memoryUsage().heapUsed;
  const heldSessions = server.sessionCount();
  await ask(child, { cmd: 'release' });
  await waitForSessions(() => server.sessionCount(), 0);

  process.stderr.write(`${clients} active clients for ${durationMs / 1000} s...\n`);
  const activeLoad = serverLoad(child.pid ?? 0, () => runtime.executor.childPids());
  const active = await ask<RunReport>(child, { cmd: 'run', url, clients, durationMs, warmupMs, runaways: 0, fullParse, plan });
  const activeServer = withPerRequest(activeLoad.end(), active);
  const rssActiveBytes = process.memoryUsage().rss;
  await waitForSessions(() => server.sessionCount(), 0);

  process.stderr.write(`${lightClients} active clients for ${durationMs / 1000} s...\n`);
  const lightLoad = serverLoad(child.pid ?? 0, () => runtime.executor.childPids());
  const light = await ask<RunReport>(child, { cmd: 'run', url, clients: lightClients, durationMs, warmupMs, runaways: 0, fullParse, plan });
  const lightServer = withPerRequest(lightLoad.end(), light);
  await waitForSessions(() => server.sessionCount(), 0);

  // The same 256 clients at the target rate instead of as fast as they can: latency at that load, not at saturation.
  process.stderr.write(`${clients} clients paced at ${pacedStepsPerS} steps/s for ${durationMs / 1000} s...\n`);
  const pacedLoad = serverLoad(child.pid ?? 0, () => runtime.executor.childPids());
  const paced = await ask<RunReport>(child, { cmd: 'run', url, clients, durationMs, warmupMs, runaways: 0, fullParse, plan, stepsPerS: pacedStepsPerS });
  const pacedServer = withPerRequest(pacedLoad.end(), paced);
  await waitForSessions(() => server.sessionCount(), 0);

  process.stderr.write(`${clients} active clients + 1 runaway query for ${durationMs / 1000} s...\n`);
  const runawayLoad = serverLoad(child.pid ?? 0, () => runtime.executor.childPids());
  const runaway = await ask<RunReport>(child, { cmd: 'run', url, clients, durationMs, warmupMs, runaways: 1, fullParse, plan });
  const runawayServer = withPerRequest(runawayLoad.end(), runaway);
  await waitForSessions(() => server.sessionCount(), 0);

  process.stderr.write(`${clients} clients paced at ${pacedStepsPerS} steps/s + 1 runaway query for ${durationMs / 1000} s...\n`);
  const pacedRunawayLoad = serverLoad(child.pid ?? 0, () => runtime.executor.childPids());
  const pacedRunaway = await ask<RunReport>(child, { cmd: 'run', url, clients, durationMs, warmupMs, runaways: 1, fullParse, plan, stepsPerS: pacedStepsPerS });
  const pacedRunawayServer = withPerRequest(pacedRunawayLoad.end(), pacedRunaway);
  await waitForSessions(() => server.sessionCount(), 0);

  const runaways = await series();

  child.send({ cmd: 'exit' } satisfies Command);
  await server.close();
  await runtime.close();

  const result = {
    dataset: { name: runtime.dataset.name, questions: runtime.dataset.questions.length, source: process.env['SPIDER_DIR'] === undefined ? 'builtin' : 'SPIDER_DIR' },
    held: { target: heldTarget, opened: hold.opened, failed: hold.failed, serverSessions: heldSessions, openMs: Math.round(hold.openMs), rssIdleMB: mb(rssIdleBytes), rssHeldMB: mb(rssHeldBytes), heapIdleMB: mb(heapIdleBytes), heapHeldMB: mb(heapHeldBytes), heapPerSessionKB: Math.round((heapHeldBytes - heapIdleBytes) / 1024 / Math.max(1, hold.opened) * 10) / 10, rssPerSessionKB: Math.round((rssHeldBytes - rssIdleBytes) / 1024 / Math.max(1, hold.opened) * 10) / 10 },
    active: { ...active, rssMB: mb(rssActiveBytes), server: activeServer },
    runaway: { ...runaway, server: runawayServer },
    light: { ...light, server: lightServer },
    p99Ratio: p99Ratio(runaway, active),
    paced: { ...paced, server: pacedServer },
    pacedRunaway: { ...pacedRunaway, server: pacedRunawayServer },
    pacedP99Ratio: p99Ratio(pacedRunaway, paced),
    fullParse,
    runaways,
  };
  bench.write({ title: 'bench:server', body: [renderMarkdown(result), renderRunawaySection(runaways)], data: result });
  process.stdout.write(renderMarkdown(result));
}

const RUNAWAY_COUNTS = [0, 1, 3, 6] as const;

interface RunawaySeries {
  /** 1-minute load average when the series started and ended (it runs last in a full run). */
  loadAverage1mStart: number;
  loadAverage1mEnd: number;
  dataset: string;
  executor: { poolSize: number; spareChildren: number; maxStuckChildren: number; timeoutMs: number };
  runs: (RunReport & { runaways: number; server: ServerLoad; childrenStarted: number; executorTimeouts: number })[];
}

/** Scenario 6: the light clients with 0, 1, 3 and 6 runaway lanes; every QUERY a new statement (see the header). */
async function runawaySeries(o: {
  child: ChildProcess; url: string; clients: number; durationMs: number; warmupMs: number; fullParse: boolean; plan: PlannedEpisode[];
  runtime: Awaited<ReturnType<typeof createSqlEnvRuntime>>; sessions: () => number;
}): Promise<RunawaySeries> {
  const loadAverage1mStart = loadAverage1mNow();
  const runs: RunawaySeries['runs'] = [];
  for (const runaways of RUNAWAY_COUNTS) {
    process.stderr.write(`${o.clients} clients (new statements) + ${runaways} runaway queries for ${o.durationMs / 1000} s...\n`);
    const before = o.runtime.executor.stats();
    const load = serverLoad(o.child.pid ?? 0, () => o.runtime.executor.childPids());
    const report = await ask<RunReport>(o.child, { cmd: 'run', url: o.url, clients: o.clients, durationMs: o.durationMs, warmupMs: o.warmupMs, runaways, uniqueQueries: true, fullParse: o.fullParse, plan: o.plan });
    const after = o.runtime.executor.stats();
    runs.push({ ...report, runaways, server: withPerRequest(load.end(), report), childrenStarted: after.spawnedChildren - before.spawnedChildren, executorTimeouts: after.timeouts - before.timeouts });
    await waitForSessions(o.sessions, 0);
  }
  const { poolSize, spareChildren, maxStuckChildren, timeoutMs } = o.runtime.executor.config;
  return {
    loadAverage1mStart,
    loadAverage1mEnd: loadAverage1mNow(),
    dataset: o.runtime.dataset.name,
    executor: { poolSize, spareChildren, maxStuckChildren, timeoutMs },
    runs,
  };
}

function renderRunawaySection(r: RunawaySeries): string {
  const f = (n: number, digits = 1): string => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');
  const rows = r.runs.map((x) =>
    `| ${x.runaways}${x.stalled ? ' (STALLED)' : ''} | ${x.clients} | ${f(x.queryP50Ms)} ms | **${f(x.queryP99Ms)} ms** | ${f(x.queryMaxMs)} ms | ${x.steps} | ${f(x.stepsPerS, 0)} | ${x.queryErrors} | ${x.runawayQueries} (${x.runawayMeanMs === null ? 'n/a' : f(x.runawayMeanMs, 0)} ms) | ${x.childrenStarted} | ${Math.round(x.server.machineShare * 100)} % |`);
  return `## 3. Quick queries with runaway queries in flight

Load average (1 min) at the start of this series: ${r.loadAverage1mStart}, at the end: ${r.loadAverage1mEnd}.
Dataset: ${r.dataset}. Executor: pool ${r.executor.poolSize}, ${r.executor.spareChildren} spare, stand-ins for up to ${r.executor.maxStuckChildren} stuck children, query timeout ${r.executor.timeoutMs} ms.

${r.runs[0]?.clients ?? '?'} clients play oracle episodes as in section 2, but each QUERY carries a fresh comment, so every one is a statement never
seen before and runs in an executor child (not the in-process fast path); meanwhile N more clients each keep \`${RUNAWAY_SQL}\` in flight,
sending the next as soon as the last is cut off. Latency counts from sending the QUERY step to its reply.
"Machine share" is the CPU that server, client and executor children got as a share of all cores: far below 100 % means other
work crowded the machine, and the latencies then mostly measure waiting for a CPU (runaways are reniced, other users' work is not).

| runaways in flight | clients | QUERY p50 | QUERY p99 | QUERY max | steps measured | steps/s | QUERY errors | runaway queries cut off (mean time to cut-off) | executor children started | machine share |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
${rows.join('\n')}
`;
}

interface ServerLoad {
  /** Share of wall time the server's event loop was busy (1 = saturated). */
  eventLoopUtilization: number;
  /** CPU time of the server process (main thread + libuv), as a share of one core. */
  cpuCores: number;
  /** CPU time of the server process per request served (steps and resets), in microseconds. */
  cpuUsPerRequest?: number;
  /** The same for the client process and for the SQL executor's children (Linux only; 0 elsewhere). */
  clientUsPerRequest?: number;
  executorUsPerRequest?: number;
  /** CPU that server + client + executor children got, as a share of all cores: how much of the machine this bench had. */
  machineShare: number;
}

type ProcessCpu = Map<number, number>;

/** CPU seconds of the given processes now. */
function sampleCpu(pids: readonly number[]): ProcessCpu {
  return new Map(pids.map((pid) => [pid, cpuSeconds(pid)]));
}

/** CPU seconds used since `before` (a process that appeared since counts from zero; one that died is lost, e.g. a killed executor child). */
function cpuSince(before: ProcessCpu, pids: readonly number[]): number {
  let total = 0;
  for (const pid of pids) total += cpuSeconds(pid) - (before.get(pid) ?? 0);
  return total;
}

/** Measure how busy the server process itself was, to tell a slow server from a crowded machine. */
function serverLoad(clientPid: number, executorPids: () => number[]): { end: () => ServerLoad & { cpuMs: number; clientMs: number; executorMs: number } } {
  const elu = performance.eventLoopUtilization();
  const cpu = process.cpuUsage();
  const client = sampleCpu([clientPid]);
  const executor = sampleCpu(executorPids());
  const t0 = performance.now();
  return {
    end: () => {
      const used = process.cpuUsage(cpu);
      const wallMs = performance.now() - t0;
      const cpuMs = (used.user + used.system) / 1000;
      const clientMs = cpuSince(client, [clientPid]) * 1000;
      const executorMs = cpuSince(executor, executorPids()) * 1000;
      return {
        eventLoopUtilization: Math.round(performance.eventLoopUtilization(elu).utilization * 100) / 100,
        cpuCores: Math.round((cpuMs / wallMs) * 100) / 100,
        machineShare: Math.round(((cpuMs + clientMs + executorMs) / wallMs / cpus().length) * 100) / 100,
        cpuMs,
        clientMs,
        executorMs,
      };
    },
  };
}

/** CPU time per request served (resets and steps of the whole run), per process. */
function withPerRequest(load: ServerLoad & { cpuMs: number; clientMs: number; executorMs: number }, report: RunReport): ServerLoad {
  const { cpuMs, clientMs, executorMs, ...rest } = load;
  const per = (ms: number): number => Math.round((ms * 1000) / Math.max(1, report.totalRequests));
  return { ...rest, cpuUsPerRequest: per(cpuMs), clientUsPerRequest: per(clientMs), executorUsPerRequest: per(executorMs) };
}

/** p99 with a runaway ÷ p99 without; NaN (never "met") when either run stalled or measured nothing (NaN comes back over IPC as null). */
function p99Ratio(withRunaway: RunReport, without: RunReport): number {
  const a = withRunaway.p99Ms as number | null;
  const b = without.p99Ms as number | null;
  if (withRunaway.stalled || without.stalled || a === null || b === null || !(a > 0) || !(b > 0)) return Number.NaN;
  return a / b;
}

function fullParseNote(fullParse: boolean): string {
  return fullParse ? 'This run used --full-parse.' : 'This run did not use --full-parse.';
}

function renderMarkdown(r: {
  dataset: { name: string; questions: number; source: string };
  held: { target: number; opened: number; failed: number; serverSessions: number; openMs: number; rssIdleMB: number; rssHeldMB: number; heapIdleMB: number; heapHeldMB: number; heapPerSessionKB: number; rssPerSessionKB: number };
  active: RunReport & { rssMB: number; server: ServerLoad };
  runaway: RunReport & { server: ServerLoad };
  light: RunReport & { server: ServerLoad };
  p99Ratio: number;
  paced: RunReport & { server: ServerLoad };
  pacedRunaway: RunReport & { server: ServerLoad };
  pacedP99Ratio: number;
  fullParse: boolean;
}): string {
  const f = (n: number, digits = 1): string => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');
  const verdict = (ok: boolean): string => (ok ? 'met' : 'NOT met');
  const us = (n: number | undefined): string => (n === undefined ? 'n/a' : `${n}`);
  const row = (name: string, clients: string, x: RunReport & { server: ServerLoad }): string =>
    `| ${name}${x.stalled ? ` (STALLED: cut off ${STALL_GRACE_MS / 1000} s after the window, ${x.unanswered} measured steps still unanswered)` : ''} | ${clients} | ${x.steps} | ${f(x.stepsPerS, 0)} | ${f(x.p50Ms)} ms | ${f(x.p90Ms)} ms | ${f(x.p99Ms)} ms | ${f(x.maxMs)} ms | ${f(x.queryP99Ms)} / ${f(x.otherP99Ms)} ms | ${x.episodes} (${x.correct}) | ${x.errors} | ` +
    `${Math.round(x.server.eventLoopUtilization * 100)} % | ${x.server.cpuCores} | ${us(x.server.cpuUsPerRequest)} / ${us(x.server.clientUsPerRequest)} / ${us(x.server.executorUsPerRequest)} µs | ${Math.round(x.server.machineShare * 100)} % |`;
  return `Dataset: ${r.dataset.name} (${r.dataset.questions} questions, from ${r.dataset.source}). Server, SQL executor children and clients share the machine:
the clients run in a separate process on the same cores, so every number here includes their CPU load (and that of anything else running).

## 1. Sessions held

| sessions requested | opened | refused/failed | server sessions | time to open + reset | server RSS idle → held | JS heap idle → held | heap per session | RSS per session |
| --- | --- | --- | --- | --- | --- | --- | --- | --- |
| ${r.held.target} | ${r.held.opened} | ${r.held.failed} | ${r.held.serverSessions} | ${r.held.openMs} ms | ${r.held.rssIdleMB} → ${r.held.rssHeldMB} MB | ${r.held.heapIdleMB} → ${r.held.heapHeldMB} MB | ${r.held.heapPerSessionKB} KB | ${r.held.rssPerSessionKB} KB |

Target: server RSS ≤ 500 MB with 1,000 sessions held — ${r.held.target >= 1000 ? verdict(r.held.rssHeldMB <= 500 && r.held.opened >= r.held.target) : `not measured (only ${r.held.target} requested)`}.
(Both readings follow a full GC. The SQL executor's child processes are not included: they are a fixed pool, independent of the session count.)

## 2. Active clients (oracle episodes: DESCRIBE gold tables, QUERY gold SQL, ANSWER)

| scenario | clients | steps measured | steps/s | p50 | p90 | p99 | max | p99 QUERY / other steps | episodes (correct) | error frames | server event loop busy | server CPU (cores) | CPU per request: server / client / SQL children | machine share of the bench's processes |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
${row('active', `${r.active.clients}`, r.active)}
${row('light (for comparison)', `${r.light.clients}`, r.light)}
${row('active + runaway', `${r.runaway.clients} + 1`, r.runaway)}
${row(`paced at ${r.paced.offeredStepsPerS ?? '?'} steps/s`, `${r.paced.clients}`, r.paced)}
${row(`paced at ${r.pacedRunaway.offeredStepsPerS ?? '?'} steps/s + runaway`, `${r.pacedRunaway.clients} + 1`, r.pacedRunaway)}

Server RSS after the active run: ${r.active.rssMB} MB.
Measured over ${r.active.measuredMs / 1000} s after a 2 s warm-up; latency = client-side time from sending a step frame to its reply.
Each client is a closed loop (next request as soon as the reply arrives), so mean latency ≈ clients ÷ throughput (Little's law):
with 256 clients, p99 ≤ 50 ms needs well over 5,000 steps/s. "Server CPU" is the CPU time the server process got (in cores);
"event loop busy" near 100 % with CPU well under one core means the server was runnable but waiting for a CPU, i.e. the machine,
not the server, was the limit (the rest went to the clients, the SQL executor children and other load on the machine).
"CPU per request" (resets + steps; read from /proc) splits the cost of one request between the server, the client process and the SQL
executor's children (which run only QUERY and SAMPLE, so their share is spread over all requests): their sum is what one request costs the
machine, and 2 cores ÷ that sum bounds the requests/s this machine can serve with the client on it. "Machine share" is the CPU these
processes got as a share of both cores: well under 100 % means other work on the machine took the rest.
Clients read each reply's type and reward without parsing the whole frame (\`--full-parse\` parses it, as a real client would).
${fullParseNote(r.fullParse)}
The runaway client kept \`${RUNAWAY_SQL}\` in flight the whole time (${r.runaway.runawayQueries} such queries, each cut off by the executor after ${r.runaway.runawayMeanMs === null ? 'n/a' : f(r.runaway.runawayMeanMs, 0)} ms on average).

Paced runs: each client sends its steps on a fixed schedule (offered rate ÷ 256 per client, random phase; resets go at once), and a
step's latency counts from its scheduled time, so a server that falls behind is charged for the backlog (no coordinated omission).
A run still waiting for replies ${STALL_GRACE_MS / 1000} s after its window is cut off and marked STALLED (e.g. every SQL executor child stuck);
its unanswered steps count with the time they had waited, and a runaway ratio involving it is not met.

Targets, closed loop (as fast as possible): ≥ 3,000 steps/s — ${verdict(r.active.stepsPerS >= 3000)}; p99 ≤ 50 ms — ${verdict(r.active.p99Ms <= 50)}; p99 with a runaway query < 2x without — ${verdict(Number.isFinite(r.p99Ratio) && r.p99Ratio < 2)} (ratio ${f(r.p99Ratio, 2)}).
Targets at the offered ${r.paced.offeredStepsPerS ?? '?'} steps/s (paced): served ${f(r.paced.stepsPerS, 0)} steps/s — ${verdict(r.paced.stepsPerS >= 0.97 * (r.paced.offeredStepsPerS ?? Infinity))}; p99 ≤ 50 ms — ${verdict(r.paced.p99Ms <= 50)}; p99 with a runaway query < 2x without — ${verdict(Number.isFinite(r.pacedP99Ratio) && r.pacedP99Ratio < 2)} (ratio ${f(r.pacedP99Ratio, 2)}).
`;
}

if (process.argv.includes('--client')) clientMain();
else
  void serverMain().catch((error: unknown) => {
    process.stderr.write(`bench:server failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  });
