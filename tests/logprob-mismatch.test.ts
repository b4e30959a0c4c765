import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EngineCompletionSource, type Completion, type CompletionSource, type EpisodeCompleter } from '@sqlenv/agents';
import { InferenceEngine, modelFingerprint, presetConfig, writeRandomCheckpoint } from '@sqlenv/model';
import { RunModelSpecSchema, type RunModelSpec, type ScoredGroup, type SqlObservation, type Trajectory } from '@sqlenv/protocol';
import { batchStats, GrpoPolicyUpdater, type TrainingBatch } from '@sqlenv/rollout';
import type { UpdateStats } from '@sqlenv/runs';

/**
 * Rollout-vs-learner mismatch and truncated importance sampling end to end: completions from the
 * inference engine (the sampler workers run), optionally through a source that shifts every recorded
 * log-prob by a chosen δ, become trajectories; the trainer's GRPO updater learns from them and
 * reports the mismatch. With r = log π_learner − log π_rollout = −δ on every token, the report must
 * see |δ| and k3 = exp(−δ) − 1 + δ, and the importance weight min(exp(−δ), C) must scale the loss and
 * the gradient by exactly that factor (the first pass of an update has ρ = π_θ/π_prox = 1, so
 * ℓ = IS·A per token).
 */
const root = mkdtempSync(join(tmpdir(), 'sqlenv-mismatch-'));
const modelDir = join(root, 'tiny');
const config = presetConfig('tiny-qwen3', { numLayers: 1 });
const TEMPERATURE = 0.9;
const NEW_TOKENS = 4;
/** Advantages chosen so that Σ w·A ≠ 0 (group-normalised ones sum to 0 and the loss would vanish). */
const ADVANTAGES = [1, 0.5, -0.25];

/** Every recorded log-prob shifted by δ: a sampler whose numerics disagree with the learner's. */
class ShiftedLogprobSource implements CompletionSource {
  constructor(
    readonly inner: CompletionSource,
    readonly delta: number,
  ) {}

  episode(context: Parameters<CompletionSource['episode']>[0]): EpisodeCompleter {
    const completer = this.inner.episode(context);
    return {
      complete: async (request): Promise<Completion> => {
        const completion = await completer.complete(request);
        return { ...completion, logprobs: completion.logprobs.map((lp) => lp + this.delta) };
      },
    };
  }
}

const observation: SqlObservation = { question: 'q', schema_info: '', result: '', error: '', step_count: 0, budget_remaining: 1, action_history: [] };

interface Sampled {
  prompt: number[];
  completion: Completion;
}

let spec: RunModelSpec;
let engineSource: EngineCompletionSource;
let engine: InferenceEngine;
/** Two groups of three one-turn episodes, sampled once; each case re-records their log-probs. */
let clean: Sampled[][];

beforeAll(async () => {
  writeRandomCheckpoint(modelDir, config, { seed: 5, initStd: 0.1 });
  spec = RunModelSpecSchema.parse({
    fingerprint: modelFingerprint(modelDir),
    lora: { rank: 2, alpha: 4, targets: ['q_proj', 'v_proj', 'down_proj'] },
    sampling: { temperature: TEMPERATURE },
    learner: { microBatchTokens: 48 },
  });
  engine = await InferenceEngine.start({ modelDir, stopIds: [] });
  engineSource = new EngineCompletionSource(engine, { temperature: TEMPERATURE, topP: 1, topK: 0 });
  clean = await sample(engineSource);
}, 120_000);

afterAll(async () => {
  await engine.close();
  rmSync(root, { recursive: true, force: true });
});

async function sample(source: CompletionSource): Promise<Sampled[][]> {
  const groups: Sampled[][] = [];
  for (let g = 0; g < 2; g++) {
    const prompt = [256, 30, 40 + g, 50];
    const group = await Promise.all(
      ADVANTAGES.map(async (_, i) => {
        const context = { episodeId: `e${g}-${i}`, questionId: 'q', dbId: 'd', seed: 10 * g + i };
        const completion = await source.episode(context).complete({ promptIds: prompt, maxNewTokens: NEW_TOKENS, seed: 10 * g + i, turn: 0, observation });
        return { prompt, completion };
      }),
    );
    groups.push(group);
  }
  return groups;
}

/** The sampled episodes with each group's log-probs shifted by its δ and recorded under `versions[g]`, as the batch that makes `version`. */
function batchOf(sampled: Sampled[][], deltas: readonly number[], version = 1, versions: readonly number[] = [0, 0]): TrainingBatch {
  const groups: ScoredGroup[] = [];
  const trajectories: Trajectory[][] = [];
  sampled.forEach((group, g) => {
    const groupId = `g${g}`;
    const v = versions[g] ?? 0;
    groups.push({
      run_id: 'r', group_id: groupId, seq: g, question_id: 'q', episode_ids: group.map((_, i) => `${groupId}-${i}`), trajectory_keys: group.map((_, i) => `t-${groupId}-${i}`),
      rewards: ADVANTAGES, advantages: ADVANTAGES, correct: ADVANTAGES.map((a) => a > 0), reward_mean: 0, reward_std: 1, zero_variance: false, min_policy_version: v, max_policy_version: v,
    });
    trajectories.push(group.map((s, i) => trajectory(`${groupId}-${i}`, groupId, i, s, deltas[g] ?? 0, v)));
  });
  return { version, groups, trajectories, stats: batchStats(version, groups, trajectories) };
}

function trajectory(episodeId: string, groupId: string, index: number, sampled: Sampled, delta: number, version: number): Trajectory {
  const { prompt, completion } = sampled;
  return {
    schema_version: 2, run_id: 'r', episode_id: episodeId, group_id: groupId, index, question_id: 'q', db_id: 'd', seed: index, policy: 'model', attempt: 1, worker_id: 'w', started_at_ms: 0,
    sampling: { temperature: TEMPERATURE, top_p: 1, top_k: 0 },
    turns: [{
      turn: 0, policy_version: version, prompt_ids: prompt, completion_ids: completion.tokens, loss_mask: [...prompt.map(() => 0 as const), ...completion.tokens.map(() => 1 as const)],
      logprobs: completion.logprobs.map((lp) => lp + delta), action: null, parse_error: 'test', policy_ms: 1,
    }],
    steps: [],
    outcome: { correct: false, total_reward: 0, steps: 1, done_reason: 'answered', error: null },
    timings: { queue_wait_ms: 0, env_ms: 0, policy_ms: 1, total_ms: 1 },
  } as Trajectory;
}

/** One update from the initial adapter (restored each time, so every case starts from the same weights). */
async function statsOf(updater: GrpoPolicyUpdater, batch: TrainingBatch): Promise<UpdateStats> {
  await updater.restore(null, 0);
  await updater.update(batch);
  return updater.lastUpdateStats()!;
}

describe('rollout-vs-learner mismatch and truncated IS (engine sampler, GRPO updater)', () => {
  it('sees the shift the sampler put on its log-probs and weights loss and gradient by min(exp(r), C)', async () => {
    const updater = await GrpoPolicyUpdater.create(spec, modelDir, { session: { mode: 'direct' } });
    try {
      // The engine's own log-probs: the learner agrees up to float rounding, w = 1, nothing cut.
      const base = await statsOf(updater, batchOf(clean, [0, 0]));
      expect(base['mismatch_abs_logprob']).toBeLessThan(1e-4);
      expect(base['mismatch_k3']).toBeLessThan(1e-8);
      expect(base['is_weight_mean']).toBeCloseTo(1, 4);
      expect(base['truncated_fraction']).toBe(0);
      expect(base['fresh_token_fraction']).toBe(1);
      expect(base['mismatch_fresh_abs_logprob']).toBe(base['mismatch_abs_logprob']);
      expect(base['tis_cap']).toBe(2);
      expect(Math.abs(base.loss)).toBeGreaterThan(1e-3);

      // The shifting source itself, played through the engine again: the same shift reaches the record.
      const viaSource = await sample(new ShiftedLogprobSource(engineSource, -0.3));
      viaSource.flat().forEach((s, k) => {
        const original = clean.flat()[k]!.completion;
        expect(s.completion.tokens).toEqual(original.tokens); // same seeds, same weights: same tokens
        s.completion.logprobs.forEach((lp, t) => expect(lp).toBeCloseTo(original.logprobs[t]! - 0.3, 5));
      });
      const small = await statsOf(updater, batchOf(viaSource, [0, 0]));
      // r = +0.3 on every token: under the cap, w = e^0.3.
      expect(small['mismatch_abs_logprob']).toBeCloseTo(0.3, 4);
      expect(small['mismatch_k3']).toBeCloseTo(Math.exp(0.3) - 1 - 0.3, 4);
      expect(small['is_weight_mean']).toBeCloseTo(Math.exp(0.3), 4);
      expect(small['truncated_fraction']).toBe(0);
      expect(small.loss / base.loss).toBeCloseTo(Math.exp(0.3), 4);
      expect(small.grad_norm / base.grad_norm).toBeCloseTo(Math.exp(0.3), 4);

      // r = +1 (e ≈ 2.72 > C = 2): every weight is exactly C.
      const large = await statsOf(updater, batchOf(clean, [-1, -1]));
      expect(large['mismatch_abs_logprob']).toBeCloseTo(1, 4);
      expect(large['mismatch_k3']).toBeCloseTo(Math.E - 2, 4);
      expect(large['is_weight_mean']).toBe(2);
      expect(large['truncated_fraction']).toBe(1);
      expect(large.loss / base.loss).toBeCloseTo(2, 5);
      expect(large.grad_norm / base.grad_norm).toBeCloseTo(2, 5);

      // r = −0.5 (the sampler more confident than the learner): w = e^−0.5, never capped.
      const low = await statsOf(updater, batchOf(clean, [0.5, 0.5]));
      expect(low['mismatch_abs_logprob']).toBeCloseTo(0.5, 4);
      expect(low['mismatch_k3']).toBeCloseTo(Math.exp(-0.5) - 1 + 0.5, 4);
      expect(low.loss / base.loss).toBeCloseTo(Math.exp(-0.5), 4);
    } finally {
      await updater.close();
    }
  }, 180_000);

  it('--tis-cap 0 turns the weight off: the loss and gradient of the agreeing sampler, whatever the shift', async () => {
    const off = await GrpoPolicyUpdater.create(spec, modelDir, { session: { mode: 'direct' }, tisCap: 0 });
    try {
      const base = await statsOf(off, batchOf(clean, [0, 0]));
      const shifted = await statsOf(off, batchOf(clean, [-1, -1]));
      expect(shifted['tis_cap']).toBe(0);
      expect(shifted['mismatch_abs_logprob']).toBeCloseTo(1, 4); // still measured
      expect(shifted['is_weight_mean']).toBe(1);
      expect(shifted['truncated_fraction']).toBe(0);
      expect(shifted.loss).toBe(base.loss);
      expect(shifted.grad_norm).toBe(base.grad_norm);
    } finally {
      await off.close();
    }
  }, 120_000);

  it('splits stale tokens from fresh ones: the fresh figure is the sampler-vs-learner mismatch alone', async () => {
    const updater = await GrpoPolicyUpdater.create(spec, modelDir, { session: { mode: 'direct' } });
    try {
      // Making version 2: group 0 recorded under version 1 (the learner's own weights: fresh),
      // group 1 under version 0 (one update behind) and shifted by 0.4.
      const stats = await statsOf(updater, batchOf(clean, [0, -0.4], 2, [1, 0]));
      expect(stats['fresh_token_fraction']).toBeCloseTo(0.5, 12);
      expect(stats['mismatch_fresh_abs_logprob']).toBeLessThan(1e-4);
      expect(stats['mismatch_abs_logprob']).toBeCloseTo(0.2, 4);
    } finally {
      await updater.close();
    }
  }, 120_000);
});
