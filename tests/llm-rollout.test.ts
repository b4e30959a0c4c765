import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  encodeAdapter,
  initLoraWeights,
  loadModel,
  modelFingerprint,
  parseLoraConfig,
  presetConfig,
  Scorer,
  writeRandomCheckpoint,
  zeroLoraWeights,
  type LoraWeights,
} from '@sqlenv/model';
import { RolloutRunSpecSchema, trainingSequence, TrajectorySchema, type Trajectory } from '@sqlenv/protocol';
import {
  createRunResolver,
  InProcessTransport,
  RolloutWorker,
  runCoordinator,
  runTrainer,
  RuntimeCache,
  scheduledQuestions,
  type PolicyUpdater,
  type TrainingBatch,
} from '@sqlenv/rollout';
import { writeTinySpider } from '@sqlenv/sql-env/testing';

/**
 * Adapter hot swap through the real seam: a trainer publishes one hand-made
 * LoRA adapter per version (safetensors, `encodeAdapter`), the worker's
 * WeightsFollower loads it between batches, and every later turn is sampled
 * with it and says so. Proof that a turn used the adapter it names: the
 * scoring graph with that adapter reproduces the turn's log-probs, and with
 * another adapter it does not.
 */
const root = mkdtempSync(join(tmpdir(), 'sqlenv-llm-rollout-'));
const modelDir = join(root, 'tiny');
const config = presetConfig('tiny-qwen3');
const lora = parseLoraConfig({ rank: 2, alpha: 8, targets: ['q_proj', 'v_proj', 'down_proj'] });
let spiderDir: string;

/** The adapter published as version v (version 0 is the base model: all zeros). */
function adapterOf(version: number): LoraWeights {
  return version === 0 ? zeroLoraWeights(config, lora) : initLoraWeights(config, lora, { seed: 100 + version, bStd: 0.6 });
}

/** A PolicyUpdater that learns nothing and publishes a known adapter per version. */
class HandMadeAdapterUpdater implements PolicyUpdater {
  readonly batches: TrainingBatch[] = [];
  restore(): Promise<void> {
    return Promise.resolve();
  }
  update(batch: TrainingBatch): Promise<Buffer> {
    this.batches.push(batch);
    return Promise.resolve(encodeAdapter(config, { lora, weights: adapterOf(batch.version) }));
  }
}

beforeAll(async () => {
  writeRandomCheckpoint(modelDir, config, { seed: 5, initStd: 0.1 });
  spiderDir = await writeTinySpider();
}, 60_000);
afterAll(() => {
  rmSync(root, { recursive: true, force: true });
  rmSync(spiderDir, { recursive: true, force: true });
});

describe('adapter hot swap in the rollout worker', () => {
  it('uses each published adapter from the next episode on and records its version in every turn', async () => {
    const transport = new InProcessTransport();
    const runtimes = new RuntimeCache({ cacheDir: join(root, 'cache'), executorPoolSize: 1 });
    const spec = RolloutRunSpecSchema.parse({
      run_id: 'hotswap',
      dataset: spiderDir,
      policy: 'model',
      episodes: 12,
      group_size: 2,
      groups_per_batch: 2,
      max_staleness: 0,
      drop_zero_variance: false,
      model: { fingerprint: modelFingerprint(modelDir), lora, sampling: { temperature: 1.2 }, max_new_tokens: 24, context_tokens: 1500 },
    });
    const updater = new HandMadeAdapterUpdater();
    const worker = new RolloutWorker({ transport, resolveRun: createRunResolver(runtimes, { modelDir, maxBatchSize: 4 }), concurrency: 4, runId: spec.run_id, workerId: 'w1', discoveryMs: 100 });
    try {
      await transport.registerRun(spec);
      await worker.start();
      const trainer = runTrainer({ transport, runId: spec.run_id, updater, pollMs: 50, runWaitMs: 10_000 });
      const questions = scheduledQuestions((await runtimes.get(spec.dataset)).dataset, spec.split);
      const summary = await runCoordinator({ transport, spec, questions, pollMs: 50 });
      await trainer;
      expect(summary).toMatchObject({ episodes_completed: 12, episodes_failed: 0, lost_episodes: 0, policy_version: 3 });
    } finally {
      await worker.close();
      await transport.close();
      await runtimes.close();
    }

    // Synchronous schedule: the episodes of batch k were all played after version k was published.
    const trajectories: Trajectory[] = [];
    updater.batches.forEach((batch, k) => {
      for (const trajectory of batch.trajectories.flat()) {
        TrajectorySchema.parse(trajectory);
        expect(trajectory).toMatchObject({ schema_version: 2, policy: 'model', sampling: { temperature: 1.2, top_p: 1, top_k: 0 } });
        expect(trajectory.turns.length).toBeGreaterThan(0);
        for (const turn of trajectory.turns) expect(turn.policy_version).toBe(k);
        trajectories.push(trajectory);
      }
    });
    expect(trajectories).toHaveLength(12);

    // Each turn's log-probs are its adapter's, and not another's.
    const { weights } = loadModel(modelDir);
    const scorer = await Scorer.create(config, weights, { lora });
    try {
      for (const version of [0, 1, 2]) {
        const trajectory = trajectories.find((t) => t.turns[0]?.policy_version === version) as Trajectory;
        const sequence = trainingSequence(trajectory);
        const [own] = await scorer.score([sequence.input_ids], { temperature: sequence.temperature, lora: adapterOf(version) });
        const [other] = await scorer.score([sequence.input_ids], { temperature: sequence.temperature, lora: adapterOf(version === 2 ? 1 : version + 1) });
        let worstOwn = 0;
        let worstOther = 0;
        sequence.loss_mask.forEach((mask, t) => {
          if (mask === 0) return;
          expect(sequence.policy_versions[t]).toBe(version);
          worstOwn = Math.max(worstOwn, Math.abs((own?.[t] ?? 0) - (sequence.logprobs[t] ?? 0)));
          worstOther = Math.max(worstOther, Math.abs((other?.[t] ?? 0) - (sequence.logprobs[t] ?? 0)));
        });
        expect(worstOwn).toBeLessThanOrEqual(1e-4);
        expect(worstOther).toBeGreaterThan(1e-2);
      }
    } finally {
      await scorer.close();
    }
  }, 240_000);
});
