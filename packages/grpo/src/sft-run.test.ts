import { describe, expect, it } from 'vitest';
import { initLoraWeights, mergeLora, parseLoraConfig, presetConfig, randomWeights, referenceForward } from '@sqlenv/model';
import { parseLearnerConfig } from './config.ts';
import type { SequenceSample } from './micro-batches.ts';
import { runSft, type SftStepReport } from './sft-run.ts';

const config = presetConfig('tiny-qwen3', { numLayers: 1 });
const weights = randomWeights(config, { seed: 3, initStd: 0.1 });
const lora = parseLoraConfig({ rank: 2, alpha: 4, targets: ['q_proj', 'up_proj'] });
const init = initLoraWeights(config, lora, { seed: 9, bStd: 0.2 });

/** −log p(token t | tokens < t) of every target of a line, from the float64 reference forward of the merged model. */
function targetLosses(sample: SequenceSample): number[] {
  const logits = referenceForward(config, mergeLora(config, weights, lora, init), [...sample.inputIds]);
  const out: number[] = [];
  sample.lossMask.forEach((m, t) => {
    if (m !== 1) return;
    const row = logits[t - 1] as Float64Array;
    const max = Math.max(...row);
    const logSumExp = max + Math.log(row.reduce((a, x) => a + Math.exp(x - max), 0));
    out.push(logSumExp - (row[sample.inputIds[t] as number] as number));
  });
  return out;
}

describe('runSft', () => {
  it("a step's loss is Σ target cross-entropy ÷ the batch's target count (not a mean of per-line means); batches wrap in file order", async () => {
    const examples: SequenceSample[] = [
      { inputIds: [256, 10, 20, 30, 40, 50, 60, 70], lossMask: [0, 0, 1, 1, 1, 1, 1, 1] },
      { inputIds: [256, 99, 98], lossMask: [0, 0, 1] },
      { inputIds: [1, 2, 3, 4, 5], lossMask: [0, 1, 0, 1, 0] },
    ];
    const reports: SftStepReport[] = [];
    const { adapter } = await runSft({
      modelConfig: config,
      weights,
      lora,
      init,
      config: parseLearnerConfig({ optimizer: { kind: 'sgd', learningRate: 0.1 }, microBatchTokens: 8 }),
      examples,
      steps: 2,
      batchSize: 2,
      session: { mode: 'direct' },
      onStep: (r) => reports.push(r),
    });
    expect(reports.map((r) => r.lines)).toEqual([[0, 1], [2, 0]]);
    const per = [targetLosses(examples[0]!), targetLosses(examples[1]!)];
    const sum = per.flat().reduce((a, b) => a + b, 0);
    const tokenMean = sum / per.flat().length;
    const meanOfMeans = (per[0]!.reduce((a, b) => a + b, 0) / per[0]!.length + per[1]![0]!) / 2;
    expect(Math.abs(meanOfMeans - tokenMean)).toBeGreaterThan(1e-3); // the two readings differ here
    expect(Math.abs(reports[0]!.loss - tokenMean) / tokenMean).toBeLessThan(1e-5);
    expect(reports[0]).toMatchObject({ step: 1, lossTokens: 7, learningRate: 0.1 });
    expect(reports[0]!.microBatches).toBe(2);
    expect(reports[1]!.lossTokens).toBe(8);
    // The adapter moved from where it started.
    const name = [...init.keys()][0]!;
    expect(adapter!.weights.get(name)).not.toEqual(init.get(name));
  });

  it('refuses zero steps', async () => {
    await expect(
      runSft({ modelConfig: config, weights, lora, config: parseLearnerConfig({}), examples: [{ inputIds: [1, 2], lossMask: [0, 1] }], steps: 0, batchSize: 1 }),
    ).rejects.toThrow(/steps must be an integer ≥ 1/);
  });

  it('stops between steps when its signal is aborted (SIGINT/SIGTERM in sqlenv sft)', async () => {
    const controller = new AbortController();
    const steps: number[] = [];
    const run = runSft({
      modelConfig: config, weights, lora, config: parseLearnerConfig({}), examples: [{ inputIds: [1, 2, 3], lossMask: [0, 1, 1] }], steps: 50, batchSize: 1,
      signal: controller.signal,
      onStep: (r) => {
        steps.push(r.step);
        if (r.step === 2) controller.abort();
      },
    });
    await expect(run).rejects.toMatchObject({ code: 'ABORTED', message: expect.stringContaining('after 2 of 50 steps') });
    expect(steps).toEqual([1, 2]);
  });
});
