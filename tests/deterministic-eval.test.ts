import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EngineCompletionSource, evaluate, LlmPolicy, loadAgentPrompt, TranscriptCollector, type EvaluationEnvironment } from '@sqlenv/agents';
import { InferenceEngine, loadChatFormat, presetConfig, writeRandomCheckpoint, type ChatFormat } from '@sqlenv/model';
import { savedEvalFromReport, writeSavedEval } from '@sqlenv/runs';
import { mulberry32 } from '@sqlenv/shared';
import { createSqlEnvRuntime, type SqlEnvRuntime } from '@sqlenv/sql-env';
import { writeTinySpider } from '@sqlenv/sql-env/testing';

/**
 * `--deterministic`: an evaluation played in lockstep saves the same file every time, byte
 * for byte but for its created_at, however its environment steps are timed and however many engine
 * replicas serve it. A tiny random Qwen3 at temperature 1, so every token is sampled; the
 * environments sleep a random few milliseconds at every reset and step (a different random stream
 * per run), so turns reach the engine in a different order each time.
 */
const root = mkdtempSync(join(tmpdir(), 'sqlenv-deterministic-'));
const modelDir = join(root, 'tiny');
let spiderDir: string;
let runtime: SqlEnvRuntime;
let chat: ChatFormat;
const prompt = loadAgentPrompt();

beforeAll(async () => {
  writeRandomCheckpoint(modelDir, presetConfig('tiny-qwen3'), { seed: 5, initStd: 0.1 });
  spiderDir = await writeTinySpider();
  runtime = await createSqlEnvRuntime({ dataset: spiderDir, cacheDir: join(root, 'cache'), executor: { poolSize: 1 } });
  chat = await loadChatFormat(modelDir);
}, 120_000);

afterAll(async () => {
  await runtime.close();
  rmSync(root, { recursive: true, force: true });
  rmSync(spiderDir, { recursive: true, force: true });
});

/** An environment whose reset and step each first sleep 0–`maxMs` ms, drawn from `random`. */
function delayed(env: EvaluationEnvironment, random: () => number, maxMs: number): EvaluationEnvironment {
  const sleep = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, Math.floor(random() * (maxMs + 1))));
  return {
    reset: async (options) => {
      await sleep();
      return env.reset(options);
    },
    step: async (action) => {
      await sleep();
      return env.step(action);
    },
    state: () => env.state(),
    close: () => env.close(),
  };
}

/** The saved evaluation's file (created_at blanked) and every turn's log-probs. */
async function savedEval(name: string, options: { replicas: number; delaySeed: number; deterministic: boolean }): Promise<{ file: string; logprobs: number[][][] }> {
  const engine = await InferenceEngine.start({ modelDir, maxBatchSize: 6, replicas: options.replicas, stopIds: chat.stopIds, deterministic: options.deterministic });
  try {
    const policy = new LlmPolicy({ chat, prompt, source: new EngineCompletionSource(engine, { temperature: 1, topP: 1, topK: 0 }), maxNewTokens: 24, contextTokens: 1800 });
    const random = mulberry32(options.delaySeed);
    const ids = runtime.dataset.questionsOf('train').map((q) => q.question_id);
    const transcripts = new TranscriptCollector();
    const report = await evaluate(() => delayed(runtime.createEnvironment(), random, 6), policy, {
      // More episodes than lanes: finished episodes are replaced while others play on.
      questionIds: [...ids, ...ids, ...ids],
      seed: 3,
      concurrency: 6,
      onTurn: transcripts.onTurn,
    });
    const saved = savedEvalFromReport(report, transcripts, { name: 'eval', version: 0, dataset: 'tiny-spider', split: 'train', seeds: [3] });
    const file = readFileSync(writeSavedEval(join(root, name), saved), 'utf8').replace(/"created_at":"[^"]*"/, '"created_at":""');
    return { file, logprobs: report.records.map((r) => r.turns.map((t) => t.logprobs)) };
  } finally {
    await engine.close();
  }
}

describe('deterministic evaluations', () => {
  it('save the same evaluation every time, whatever the timing of the environment steps, at one and at two replicas', async () => {
    for (const replicas of [1, 2]) {
      const first = await savedEval(`r${replicas}-a`, { replicas, delaySeed: replicas, deterministic: true });
      const again = await savedEval(`r${replicas}-b`, { replicas, delaySeed: 10 + replicas, deterministic: true });
      const parsed = JSON.parse(first.file) as { episodes: Array<{ transcript: unknown[] }> };
      expect(parsed.episodes.length).toBeGreaterThan(6);
      expect(parsed.episodes.some((ep) => ep.transcript.length > 1)).toBe(true);
      expect(again.file).toBe(first.file);
      // Not only the tokens: every log-prob to the last bit, since every turn ran in the same batches.
      // (Without lockstep they differ by float rounding from run to run: docs/inference.md, "Exactness".)
      expect(again.logprobs).toEqual(first.logprobs);
    }
  }, 240_000);
});
