import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeOptimizerState } from '@sqlenv/grpo';
import { decodeAdapter, Generator, loadModel, modelFingerprint, parseLoraConfig, presetConfig, writeRandomCheckpoint } from '@sqlenv/model';
import { AdvantageMode, RolloutRunSpecSchema, RunModelSpecSchema, type RunModelSpec, type ScoredGroup, type Trajectory } from '@sqlenv/protocol';
import { silentLogger } from '@sqlenv/shared';
import { batchStats, GrpoPolicyUpdater, groupAdvantages, OPTIMIZER_PART, policyUpdaterFor, StatsPolicyUpdater, type PolicyUpdate, type TrainingBatch } from '@sqlenv/rollout';

/**
 * The trainer's GRPO updater on trajectories built here with real sampled tokens (a tiny model's
 * generator), so the behaviour log-probs are the sampler's own: restarts resume exactly, the
 * published blob is a PEFT adapter, the optimizer state rides with it.
 */
const root = mkdtempSync(join(tmpdir(), 'sqlenv-grpo-updater-'));
const modelDir = join(root, 'tiny');
const config = presetConfig('tiny-qwen3', { numLayers: 1 });
const loraShape = { rank: 2, alpha: 4, targets: ['q_proj', 'v_proj', 'down_proj'] as const };
let spec: RunModelSpec;
let batches: TrainingBatch[];

beforeAll(async () => {
  writeRandomCheckpoint(modelDir, config, { seed: 5, initStd: 0.1 });
  spec = RunModelSpecSchema.parse({
    fingerprint: modelFingerprint(modelDir),
    lora: { ...loraShape, targets: [...loraShape.targets] },
    sampling: { temperature: 0.9 },
    learner: { optimizer: { learningRate: 0.01, warmupSteps: 1, schedule: 'cosine', totalSteps: 10 }, microBatchTokens: 48 },
  });
  // Three batches of two groups × three episodes: prompt + a sampled completion, rewarded by its
  // first token's parity (any deterministic rule will do; the updater only sees rewards).
  const { weights } = loadModel(modelDir);
  const generator = await Generator.create(config, weights, { lora: parseLoraConfig(spec.lora) });
  try {
    batches = [];
    let seed = 0;
    for (let b = 0; b < 3; b++) {
      const groups: ScoredGroup[] = [];
      const trajectories: Trajectory[][] = [];
      for (let g = 0; g < 2; g++) {
        const prompt = [256, 30 + b, 40 + g, 50];
        const results = await generator.generate([0, 1, 2].map(() => ({ promptIds: prompt, seed: seed++, temperature: 0.9 })), { maxNewTokens: 4, stopIds: [] });
        const rewards = results.map((r) => (r.tokens[0]! % 2 === 0 ? 1 : 0));
        const { advantages, mean, std, zeroVariance } = groupAdvantages(rewards, AdvantageMode.GRPO);
        const groupId = `g${b}-${g}`;
        groups.push({
          run_id: 'r', group_id: groupId, seq: b * 2 + g, question_id: 'q', episode_ids: results.map((_, i) => `${groupId}-${i}`), trajectory_keys: results.map((_, i) => `t-${groupId}-${i}`),
          rewards, advantages, correct: rewards.map((r) => r === 1), reward_mean: mean, reward_std: std, zero_variance: zeroVariance, min_policy_version: 0, max_policy_version: 0,
        });
        trajectories.push(results.map((r, i) => trajectory(`${groupId}-${i}`, groupId, i, prompt, r.tokens, r.logprobs, rewards[i]!)));
      }
      batches.push({ version: b + 1, groups, trajectories, stats: batchStats(b + 1, groups, trajectories) });
    }
  } finally {
    await generator.close();
  }
}, 60_000);

afterAll(() => rmSync(root, { recursive: true, force: true }));

function trajectory(episodeId: string, groupId: string, index: number, prompt: number[], completion: number[], logprobs: number[], reward: number): Trajectory {
  return {
    schema_version: 2, run_id: 'r', episode_id: episodeId, group_id: groupId, index, question_id: 'q', db_id: 'd', seed: index, policy: 'model', attempt: 1, worker_id: 'w', started_at_ms: 0,
    sampling: { temperature: 0.9, top_p: 1, top_k: 0 },
    turns: [{ turn: 0, policy_version: 0, prompt_ids: prompt, completion_ids: completion, loss_mask: [...prompt.map(() => 0 as const), ...completion.map(() => 1 as const)], logprobs, action: null, parse_error: 'test', policy_ms: 1 }],
    steps: [],
    outcome: { correct: reward === 1, total_reward: reward, steps: 1, done_reason: 'answered', error: null },
    timings: { queue_wait_ms: 0, env_ms: 0, policy_ms: 1, total_ms: 1 },
  } as Trajectory;
}

const asUpdate = (u: Buffer | PolicyUpdate): PolicyUpdate => (Buffer.isBuffer(u) ? { weights: u } : u);

describe('GrpoPolicyUpdater', () => {
  it('publishes a PEFT adapter that moves, with the optimizer state as a part, and reports its numbers', async () => {
    const updater = await GrpoPolicyUpdater.create(spec, modelDir, { session: { mode: 'direct' } });
    try {
      await updater.restore(null, 0);
      const first = asUpdate(await updater.update(batches[0]!));
      const adapter = decodeAdapter(config, first.weights);
      expect(adapter.lora).toMatchObject({ rank: 2, alpha: 4 });
      expect(decodeOptimizerState(first.parts![OPTIMIZER_PART]!).step).toBe(1);
      const stats = updater.lastUpdateStats();
      expect(stats).toMatchObject({ clip_fraction: 0, kl: null, learning_rate: 0 }); // warm-up step 0 has lr 0
      expect(stats!.grad_norm).toBeGreaterThan(0);
      // The warm-up's first step has lr 0 and moves nothing; the second moves B off zero.
      expect([...adapter.weights].every(([name, v]) => !name.includes('lora_B') || v.every((x) => x === 0))).toBe(true);
      const second = asUpdate(await updater.update(batches[1]!));
      expect(updater.lastUpdateStats()!.learning_rate).toBeCloseTo(0.01, 10);
      expect([...decodeAdapter(config, second.weights).weights].some(([name, v]) => name.includes('lora_B') && v.some((x) => x !== 0))).toBe(true);
    } finally {
      await updater.close();
    }
  }, 60_000);

  it('a trainer restarted from the committed version k makes exactly the update k + 1 of an uninterrupted run', async () => {
    const uninterrupted = await GrpoPolicyUpdater.create(spec, modelDir, { session: { mode: 'direct' } });
    const outputs: PolicyUpdate[] = [];
    try {
      await uninterrupted.restore(null, 0);
      for (const batch of batches) outputs.push(asUpdate(await uninterrupted.update(batch)));
    } finally {
      await uninterrupted.close();
    }
    // "Killed" after version 2: a new process restores the committed blob and its parts.
    const restarted = await GrpoPolicyUpdater.create(spec, modelDir, { session: { mode: 'direct' } });
    try {
      const committed = outputs[1]!;
      await restarted.restore(committed.weights, 2, async (name) => committed.parts?.[name] ?? null);
      const next = asUpdate(await restarted.update(batches[2]!));
      expect(Buffer.compare(next.weights, outputs[2]!.weights)).toBe(0);
      expect(Buffer.compare(next.parts![OPTIMIZER_PART]!, outputs[2]!.parts![OPTIMIZER_PART]!)).toBe(0);
      // Without the optimizer state the next update differs (the test can tell the two apart).
      await restarted.restore(committed.weights, 2);
      const fresh = asUpdate(await restarted.update(batches[2]!));
      expect(Buffer.compare(fresh.weights, outputs[2]!.weights)).not.toBe(0);
    } finally {
      await restarted.close();
    }
  }, 60_000);

  it('policyUpdaterFor: GRPO for a model run, statistics-only otherwise; a model run without a model directory is a clear error', async () => {
    const run = (model?: RunModelSpec) => RolloutRunSpecSchema.parse({ run_id: 'r', dataset: 'builtin', policy: model ? 'model' : 'oracle', episodes: 8, group_size: 2, ...(model ? { model } : {}) });
    await expect(policyUpdaterFor(run(spec), undefined, silentLogger)).rejects.toThrow(/run r trains a model: give the trainer --model DIR/);
    const stats = await policyUpdaterFor(run(), undefined, silentLogger);
    expect(stats).toBeInstanceOf(StatsPolicyUpdater);
    await stats.close();
    const grpo = await policyUpdaterFor(run(spec), modelDir, silentLogger);
    expect(grpo).toBeInstanceOf(GrpoPolicyUpdater);
    await grpo.close();
  });

  it('refuses a model directory that is not the run model', async () => {
    const other = join(root, 'other');
    writeRandomCheckpoint(other, config, { seed: 6, initStd: 0.1 });
    await expect(GrpoPolicyUpdater.create(spec, other)).rejects.toThrow(/not the run's model/);
  });
});
