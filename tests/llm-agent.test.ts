import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  actionCompletionIds,
  EngineCompletionSource,
  evaluate,
  LlmPolicy,
  loadAgentPrompt,
  ScriptedCompletionSource,
  type EvaluationReport,
} from '@sqlenv/agents';
import type { ChatFormat, ExperimentalEngineOptions } from '@sqlenv/model';
import { InferenceEngine, loadChatFormat, loadModel, modelInit, presetConfig, Scorer, writeRandomCheckpoint } from '@sqlenv/model';
import { sequenceFromTurns, type SqlAction } from '@sqlenv/protocol';
import { createSqlEnvRuntime, type SqlEnvRuntime } from '@sqlenv/sql-env';
import { writeTinySpider } from '@sqlenv/sql-env/testing';
import { writeSftData } from '@sqlenv/cli';
import { SQLEnvClient } from '@sqlenv/client';
import { startHarness } from '@sqlenv/env-server/testing';

/**
 * The LLM agent on the real environment (a small Spider-layout dataset, real
 * SQLite) with a tiny random Qwen3 (byte tokenizer): scripted completions
 * through the agent's own code path, SFT data from the same path, and the
 * random model end to end, with its recorded log-probs checked against the
 * scoring graph.
 */
const root = mkdtempSync(join(tmpdir(), 'sqlenv-llm-agent-'));
const modelDir = join(root, 'tiny');
let spiderDir: string;
let runtime: SqlEnvRuntime;
let chat: ChatFormat;
const prompt = loadAgentPrompt();

beforeAll(async () => {
  writeRandomCheckpoint(modelDir, presetConfig('tiny-qwen3'), { seed: 3, initStd: 0.1 });
  spiderDir = await writeTinySpider();
  runtime = await createSqlEnvRuntime({ dataset: spiderDir, cacheDir: join(root, 'cache'), executor: { poolSize: 1 } });
  chat = await loadChatFormat(modelDir);
}, 120_000);

afterAll(async () => {
  await runtime.close();
  rmSync(root, { recursive: true, force: true });
  rmSync(spiderDir, { recursive: true, force: true });
});

/** The oracle's plan for a question, worked out here (not through OraclePolicy). */
function oraclePlan(questionId: string): SqlAction[] {
  const q = runtime.dataset.question(questionId);
  if (q === undefined) throw new Error(`no question ${questionId}`);
  return [
    ...q.tables_involved.map((table): SqlAction => ({ action_type: 'DESCRIBE', argument: table })),
    { action_type: 'QUERY', argument: q.gold_sql },
    { action_type: 'ANSWER', argument: q.gold_answer },
  ];
}

/** A script that writes each planned action as the agent's tool call; `garbage` turns write nonsense first. */
function scriptedPolicy(garbageTurns: ReadonlySet<number> = new Set()): LlmPolicy {
  const source = new ScriptedCompletionSource(
    (request, context) => {
      if (garbageTurns.has(request.turn)) return [...chat.tokenizer.encode('I will look at the tables.'), chat.imEndId];
      const plan = oraclePlan(context.questionId);
      const step = request.turn - [...garbageTurns].filter((t) => t < request.turn).length;
      return actionCompletionIds(plan[Math.min(step, plan.length - 1)] as SqlAction, prompt, chat);
    },
    { stopIds: chat.stopIds },
  );
  return new LlmPolicy({ chat, prompt, source, maxNewTokens: 512, contextTokens: 2048 });
}

const trainIds = (): string[] => runtime.dataset.questionsOf('train').map((q) => q.question_id);

describe('the LLM agent on SQLEnv', () => {
  let scripted: EvaluationReport;

  it('plays whole episodes to a correct answer from scripted completions, token-exact', async () => {
    const policy = scriptedPolicy();
    scripted = await evaluate(() => runtime.createEnvironment(), policy, { questionIds: trainIds(), seed: 0, concurrency: 2 });
    expect(scripted.errors).toBe(0);
    expect(scripted.success_rate).toBe(1);
    expect(scripted.format_error_rate).toBe(0);
    for (const record of scripted.records) {
      expect(record.done_reason).toBe('answered');
      const first = record.turns[0];
      expect(first?.prompt_ids.slice(0, policy.systemIds.length)).toEqual(policy.systemIds);
      for (const turn of record.turns) {
        expect(turn.loss_mask).toEqual([...turn.prompt_ids.map(() => 0), ...turn.completion_ids.map(() => 1)]);
        expect(turn.completion_ids.at(-1)).toBe(chat.imEndId);
        expect(turn.action).not.toBeNull();
      }
      // Later prompts open with the newline that closes the previous assistant turn.
      for (const turn of record.turns.slice(1)) expect(chat.tokenizer.decode(turn.prompt_ids.slice(0, 1))).toBe('\n');
      expect(record.reward).toBeGreaterThan(1);
    }
  });

  it('a reply with no tool call is a PARSE_ERROR step: error observation, format penalty, one step of the budget', async () => {
    const report = await evaluate(() => runtime.createEnvironment(), scriptedPolicy(new Set([0])), { questionIds: trainIds().slice(0, 1), seed: 0 });
    const record = report.records[0];
    expect(record?.success).toBe(true);
    expect(record?.format_errors).toBe(1);
    expect(record?.turns[0]).toMatchObject({ action: null, parse_error: 'no tool call found' });
    expect(record?.trajectory_steps[0]).toMatchObject({ action: { action_type: 'PARSE_ERROR', argument: 'Invalid tool call: no tool call found' }, reward: -0.1, error: 'Invalid tool call: no tool call found', executed: false });
    // The next turn's prompt shows the error as the tool response.
    expect(chat.tokenizer.decode(record?.turns[1]?.prompt_ids ?? [])).toContain('<tool_response>\nError: Invalid tool call: no tool call found\n(14 steps left)\n</tool_response>');
    expect(record?.steps).toBe((scripted.records[0]?.steps ?? 0) + 1);
  });

  it('parse errors work the same against the OpenEnv server: the PARSE_ERROR action goes over the wire', async () => {
    const harness = await startHarness(runtime, { maxSessions: 4 });
    try {
      const report = await evaluate(() => SQLEnvClient.connect(harness.wsUrl), scriptedPolicy(new Set([0])), { questionIds: trainIds().slice(0, 1), seed: 0 });
      const record = report.records[0];
      expect(record).toMatchObject({ error: null, success: true, format_errors: 1 });
      expect(record?.trajectory_steps[0]).toMatchObject({ action: { action_type: 'PARSE_ERROR' }, reward: -0.1, error: 'Invalid tool call: no tool call found', reward_breakdown: null });
    } finally {
      await harness.close();
    }
  });

  it('sft-data lines are exactly the ids the agent would have fed and sampled, loss on its own tokens', async () => {
    const out = join(root, 'sft.jsonl');
    const summary = await writeSftData({ dataset: spiderDir, split: 'train', model: modelDir, out, episodes: 'all', seed: 0, format: 'ids', thinking: false }, { logger: undefined as never });
    const lines = readFileSync(out, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { input_ids: number[]; loss_mask: number[] });
    expect(summary.skipped).toEqual([]);
    expect(lines).toHaveLength(scripted.records.length);
    scripted.records.forEach((record, i) => {
      const sequence = sequenceFromTurns(record.turns, null);
      expect(lines[i]?.input_ids).toEqual(sequence.input_ids);
      expect(lines[i]?.loss_mask).toEqual(sequence.loss_mask);
      // Exactly the assistant's tokens, closing <|im_end|> included, are targets.
      const targets = lines[i]?.input_ids.filter((_, t) => lines[i]?.loss_mask[t] === 1) ?? [];
      expect(targets).toEqual(record.turns.flatMap((turn) => turn.completion_ids));
    });
  });

  it('a directory laid out like a Hugging Face Qwen3 checkpoint (tokenizer.json, chat template) plays unchanged', async () => {
    // A tiny decoder with Qwen's real vocabulary: `model init` adds Qwen3's tokenizer.json and
    // tokenizer_config.json, as in a downloaded checkpoint directory.
    const dir = join(root, 'qwen-vocab');
    const config = { ...presetConfig('tiny-qwen3'), vocabSize: 151_936, eosTokenIds: [151_645, 151_643], padTokenId: 151_643, numLayers: 1 };
    const init = await modelInit({ config: JSON.stringify(config), out: dir, seed: 2 });
    expect(init.files).toContain('tokenizer.json');
    const qwenChat = await loadChatFormat(dir);
    expect(qwenChat.tokenizer.decode(qwenChat.generationPromptIds())).toBe('<|im_start|>assistant\n<think>\n\n</think>\n\n');
    const engine = await InferenceEngine.start({ modelDir: dir, stopIds: qwenChat.stopIds });
    try {
      const policy = new LlmPolicy({ chat: qwenChat, prompt, source: new EngineCompletionSource(engine, { temperature: 1, topP: 1, topK: 0 }), maxNewTokens: 8, contextTokens: 600 });
      expect(policy.systemIds).toHaveLength(315);
      const report = await evaluate(() => runtime.createEnvironment(), policy, { questionIds: trainIds().slice(0, 2), seed: 1, concurrency: 2 });
      expect(report.errors).toBe(0);
      for (const record of report.records) {
        expect(record.turns.length).toBeGreaterThan(1);
        expect(record.turns[0]?.prompt_ids.slice(0, 315)).toEqual(policy.systemIds);
        for (const turn of record.turns) expect(Math.max(...turn.completion_ids)).toBeLessThan(151_936);
      }
    } finally {
      await engine.close();
    }
  }, 120_000);

  it('episodes played with KV cache reuse and continuous batching record exactly the turns of the static re-prefilling engine', async () => {
    const sampling = { temperature: 1, topP: 1, topK: 0 };
    const play = async (knobs: ExperimentalEngineOptions): Promise<{ report: EvaluationReport; stats: InferenceEngine['stats'] }> => {
      const engine = await InferenceEngine.start({ modelDir, maxBatchSize: 4, stopIds: chat.stopIds, experimental: knobs });
      try {
        const policy = new LlmPolicy({ chat, prompt, source: new EngineCompletionSource(engine, sampling), maxNewTokens: 24, contextTokens: 1800 });
        const report = await evaluate(() => runtime.createEnvironment(), policy, { questionIds: trainIds().slice(0, 4), seed: 11, concurrency: 4 });
        return { report, stats: engine.stats };
      } finally {
        await engine.close();
      }
    };
    const reused = await play({ reuseKv: true, chunkSteps: 8 });
    const plain = await play({ reuseKv: false, batching: 'static' });
    expect(reused.report.errors).toBe(0);
    const turns = (report: EvaluationReport) => report.records.map((r) => r.turns.map((t) => ({ prompt: t.prompt_ids, completion: t.completion_ids })));
    expect(turns(reused.report)).toEqual(turns(plain.report));
    reused.report.records.forEach((record, e) =>
      record.turns.forEach((turn, t) => {
        const other = plain.report.records[e]?.turns[t]?.logprobs ?? [];
        turn.logprobs.forEach((lp, i) => expect(Math.abs(lp - (other[i] ?? NaN))).toBeLessThanOrEqual(1e-5));
      }),
    );
    expect(reused.report.records.some((r) => r.turns.length > 1)).toBe(true);
    // Only the first turn of each episode prefills its system prompt; later turns read the cache.
    expect(reused.stats.reusedTokens).toBeGreaterThan(0);
    expect(reused.stats.prefillTokens).toBeLessThan(plain.stats.prefillTokens / 2);
  }, 180_000);

  it('a random tiny model plays episodes end to end; the scoring graph reproduces its log-probs', async () => {
    const engine = await InferenceEngine.start({ modelDir, maxBatchSize: 4, stopIds: chat.stopIds });
    try {
      const sampling = { temperature: 0.9, topP: 0.95, topK: 0 };
      const policy = new LlmPolicy({ chat, prompt, source: new EngineCompletionSource(engine, sampling), maxNewTokens: 40, contextTokens: 1600 });
      const report = await evaluate(() => runtime.createEnvironment(), policy, { questionIds: [...trainIds(), ...trainIds()], seed: 7, concurrency: 4 });
      expect(report.errors).toBe(0);
      expect(engine.stats.meanBatchSize).toBeGreaterThan(1);
      for (const record of report.records) {
        expect(['answered', 'budget_exhausted', 'context_exhausted']).toContain(record.done_reason);
        expect(record.context_tokens).toBeLessThanOrEqual(1600);
        for (const turn of record.turns) expect(turn.completion_ids.length).toBeLessThanOrEqual(40);
      }
      expect(report.records.some((r) => r.done_reason === 'context_exhausted')).toBe(true);

      const { config, weights } = loadModel(modelDir);
      const scorer = await Scorer.create(config, weights);
      try {
        let checked = 0;
        for (const record of report.records.slice(0, 3)) {
          const sequence = sequenceFromTurns(record.turns, { temperature: sampling.temperature, top_p: sampling.topP, top_k: 0 });
          const [scored] = await scorer.score([sequence.input_ids], { temperature: sequence.temperature });
          sequence.loss_mask.forEach((mask, t) => {
            if (mask === 0) return;
            expect(Math.abs((scored?.[t] ?? 0) - (sequence.logprobs[t] ?? 0))).toBeLessThanOrEqual(1e-4);
            checked += 1;
          });
        }
        expect(checked).toBeGreaterThan(100);
      } finally {
        await scorer.close();
      }
    } finally {
      await engine.close();
    }
  }, 180_000);
});
