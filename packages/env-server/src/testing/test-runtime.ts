import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { createSqlEnvRuntime, type SqlEnvRuntime } from '@sqlenv/sql-env';
import type { EnvServerOptions } from '../env-server.ts';
import { startHarness, type Harness } from './server-harness.ts';

/** What an oracle needs to play one question: reset id, tables to describe, gold SQL and answer. */
export interface OracleEpisode {
  questionId: string;
  dbId: string;
  tables: string[];
  goldSql: string;
  goldAnswer: string;
}

/**
 * The real SQL runtime for server tests: Spider when SPIDER_DIR is set (CI),
 * else the builtin dataset (generated into a cache under the OS temp dir).
 * `queryTimeoutMs` (4 s, the original's is 5 s) bounds the runaway-query tests; it stays long
 * enough that an ordinary query on a loaded CI machine finishes well before a runaway is cut off.
 */
export async function createTestRuntime(options: { queryTimeoutMs?: number } = {}): Promise<SqlEnvRuntime> {
  const cacheDir = join(tmpdir(), 'sqlenv-test-cache');
  mkdirSync(cacheDir, { recursive: true });
  return createSqlEnvRuntime({
    dataset: process.env['SPIDER_DIR'] ?? 'builtin',
    cacheDir,
    env: { queryTimeoutMs: options.queryTimeoutMs ?? 4_000 },
  });
}

/** Oracle episodes of the loaded dataset, simplest first (fewest tables), for deterministic tests. */
export function oracleEpisodes(runtime: SqlEnvRuntime, count: number): OracleEpisode[] {
  return [...runtime.dataset.questions]
    .filter((q) => q.tables_involved.length > 0)
    .sort((a, b) => a.tables_involved.length - b.tables_involved.length || a.question_id.localeCompare(b.question_id))
    .slice(0, count)
    .map((q) => ({ questionId: q.question_id, dbId: q.database_name, tables: [...q.tables_involved], goldSql: q.gold_sql, goldAnswer: q.gold_answer }));
}

/** The simplest oracle episode of the loaded dataset (what most server tests play). */
export function firstOracleEpisode(runtime: SqlEnvRuntime): OracleEpisode {
  const episode = oracleEpisodes(runtime, 1)[0];
  if (episode === undefined) throw new Error('dataset has no playable question');
  return episode;
}

/** A query that never finishes on its own: the executor's timeout must cut it off. */
export const RUNAWAY_SQL = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c';

/** The real runtime, its simplest oracle episode and a server on it: the setup of most server tests. */
export interface TestServer {
  runtime: SqlEnvRuntime;
  oracle: OracleEpisode;
  harness: Harness;
  /** Closes the server, then the runtime. */
  close(): Promise<void>;
}

export async function startTestServer(options: Omit<EnvServerOptions, 'runtime'> = {}): Promise<TestServer> {
  const runtime = await createTestRuntime();
  try {
    const oracle = firstOracleEpisode(runtime);
    const harness = await startHarness(runtime, options);
    return {
      runtime,
      oracle,
      harness,
      close: async () => {
        await harness.close();
        await runtime.close();
      },
    };
  } catch (error) {
    await runtime.close();
    throw error;
  }
}
