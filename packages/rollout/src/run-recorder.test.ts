import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE, encodeAdapter, initLoraWeights, loadAdapterDir, parseLoraConfig, presetConfig } from '@sqlenv/model';
import { RolloutRunSpecSchema } from '@sqlenv/protocol';
import { runCoordinator } from './coordinator.ts';
import { RolloutWorker } from './rollout-worker.ts';
import { TOY_QUESTIONS, ToyPolicy, toyEnvironments } from './testing/toy-environment.ts';
import { runTrainer, type PolicyUpdater, type TrainingBatch } from './trainer.ts';
import { InProcessTransport } from './transport/in-process-transport.ts';
import { readRunMetrics, RunRecorder, saveAdapterVersion, writeRunSpec, type UpdateStats } from '@sqlenv/runs';

const config = presetConfig('tiny-qwen3');
const lora = parseLoraConfig({ rank: 2, alpha: 4, targets: ['q_proj', 'v_proj'] });

/** A learner stand-in: publishes an adapter blob and reports numbers (NaN loss at version 3). */
class AdapterUpdater implements PolicyUpdater {
  #stats: UpdateStats | null = null;
  restore(): Promise<void> {
    return Promise.resolve();
  }
  update(batch: TrainingBatch): Promise<Buffer> {
    this.#stats = { loss: batch.version === 3 ? Number.NaN : 1 / batch.version, kl: 0.01 * batch.version, clip_fraction: 0.1, grad_norm: 2, learning_rate: 1e-4, entropy: 0.5 };
    return Promise.resolve(encodeAdapter(config, { lora, weights: initLoraWeights(config, lora, { seed: batch.version, bStd: 0.01 }) }));
  }
  lastUpdateStats(): UpdateStats | null {
    return this.#stats;
  }
}

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

describe('RunRecorder on a run', () => {
  it('writes one metrics line per version with the learner numbers, and the adapters of every N-th and the final version', async () => {
    dir = mkdtempSync(join(tmpdir(), 'sqlenv-run-dir-'));
    const transport = new InProcessTransport();
    const spec = RolloutRunSpecSchema.parse({ run_id: 'rec', policy: 'toy', episodes: 40, group_size: 2, groups_per_batch: 4, max_staleness: 1, drop_zero_variance: false });
    await transport.registerRun(spec);
    const worker = new RolloutWorker({ transport, resolveRun: () => Promise.resolve({ policy: new ToyPolicy(), environments: toyEnvironments() }), concurrency: 4, workerId: 'w', discoveryMs: 20 });
    await worker.start();
    const recorder = new RunRecorder({ dir, saveEvery: 2 });
    const trainer = runTrainer({ transport, runId: spec.run_id, updater: new AdapterUpdater(), pollMs: 10, runWaitMs: 5_000, onCommitted: recorder.onCommitted });
    await runCoordinator({ transport, spec, questions: TOY_QUESTIONS, pollMs: 10 });
    const result = await trainer;
    await worker.close();
    await transport.close();
    expect(recorder.finish()).toBe(join(dir, 'adapters', `v${result.version}`));

    const lines = readRunMetrics(dir);
    expect(result.version).toBe(5);
    expect(lines.map((l) => l.version)).toEqual([1, 2, 3, 4, 5]);
    expect(lines[0]).toMatchObject({ loss: 1, kl: 0.01, clip_fraction: 0.1, grad_norm: 2, learning_rate: 1e-4, extra: { entropy: 0.5 }, non_finite: [], episodes: 8, format_error_rate: 0, mean_tokens: 0 });
    expect(lines[2]).toMatchObject({ loss: null, non_finite: ['loss'] });
    expect(recorder.nonFiniteVersions).toEqual([3]);
    for (const line of lines) {
      expect(Object.values(line.staleness_histogram).reduce((a, b) => a + b, 0)).toBe(line.episodes);
      expect(Object.keys(line.phase_seconds).sort()).toEqual(['commit', 'other', 'read', 'rollout_wait', 'update']);
      expect(line.episodes_per_s).toBeGreaterThan(0);
    }
    expect(lines.map((l) => l.time)).toEqual([...lines.map((l) => l.time)].sort((a, b) => a - b));
    expect(recorder.savedAdapterVersions).toEqual([2, 4, 5]);
    const adapter = loadAdapterDir(join(dir, 'adapters', 'v4'), config);
    expect(adapter.lora).toEqual(lora);
    expect(JSON.parse(readFileSync(join(dir, 'adapters', 'v4', ADAPTER_CONFIG_FILE), 'utf8'))).toMatchObject({ peft_type: 'LORA', r: 2, lora_alpha: 4, target_modules: ['q_proj', 'v_proj'] });
    expect(existsSync(join(dir, 'adapters', 'v3'))).toBe(false);

    // The same directory for the same run (a restarted trainer) appends; for another run it is refused.
    const runDir = dir;
    writeRunSpec(runDir, spec);
    expect(new RunRecorder({ dir: runDir, runId: 'rec', saveEvery: 0 })).toBeInstanceOf(RunRecorder);
    expect(() => new RunRecorder({ dir: runDir, runId: 'other', saveEvery: 0 })).toThrow(/holds run rec, not other/);
  });

  it('saves no adapter for the statistics-only blob, and writes an adapter blob byte for byte', () => {
    dir = mkdtempSync(join(tmpdir(), 'sqlenv-run-dir-'));
    expect(saveAdapterVersion(dir, 1, Buffer.from(JSON.stringify({ kind: 'stats', version: 1, batches: [] })))).toBeNull();
    expect(existsSync(join(dir, 'adapters'))).toBe(false);
    const blob = encodeAdapter(config, { lora, weights: initLoraWeights(config, lora) }, { dtype: 'F16' });
    const saved = saveAdapterVersion(dir, 7, blob, { baseModel: 'my-model' });
    expect(readFileSync(join(saved ?? '', ADAPTER_WEIGHTS_FILE))).toEqual(blob);
    expect(JSON.parse(readFileSync(join(saved ?? '', ADAPTER_CONFIG_FILE), 'utf8'))).toMatchObject({ base_model_name_or_path: 'my-model' });
  });
});
