import { describe, expect, it } from 'vitest';
import { OptimizerConfigSchema } from './config.ts';
import { decodeOptimizerState, encodeLearnerState } from './checkpoint.ts';
import { learningRateAt, LoraOptimizer } from './optimizer.ts';

const opt = (input: object) => OptimizerConfigSchema.parse(input);

describe('LoraOptimizer', () => {
  it('AdamW matches a hand computation of two steps (decoupled decay, bias correction)', () => {
    const o = new LoraOptimizer(opt({ learningRate: 0.1, weightDecay: 0.01, maxGradNorm: 0 }));
    const p = new Map([['w', Float32Array.of(1)]]);
    o.apply(p, new Map([['w', Float64Array.of(0.5)]]));
    expect(p.get('w')![0]).toBeCloseTo(0.899, 6);
    o.apply(p, new Map([['w', Float64Array.of(-0.5)]]));
    // p = 0.899·0.999 + 0.1 · (0.005 / 0.19) / (√(0.00049975 / 0.001999) + 1e-8)
    expect(p.get('w')![0]).toBeCloseTo(0.899 * 0.999 + (0.1 * (0.005 / 0.19)) / 0.5, 6);
    expect(o.step).toBe(2);
  });

  it('clips the global norm like clip_grad_norm_, and sgd is exactly p − lr·g (no clipping)', () => {
    const adam = new LoraOptimizer(opt({ learningRate: 1, maxGradNorm: 1 }));
    const report = adam.apply(new Map([['a', Float32Array.of(0, 0)]]), new Map([['a', Float64Array.of(3, 4)]]));
    expect(report).toMatchObject({ gradNorm: 5, clipped: true, learningRate: 1 });
    const sgd = new LoraOptimizer(opt({ kind: 'sgd', learningRate: 0.5, maxGradNorm: 1 }));
    const p = new Map([['a', Float32Array.of(1, 2)]]);
    sgd.apply(p, new Map([['a', Float64Array.of(3, 4)]]));
    expect([...p.get('a')!]).toEqual([1 - 1.5, 2 - 2]);
  });

  it('refuses non-finite gradients without touching the parameters', () => {
    const o = new LoraOptimizer(opt({}));
    const p = new Map([['a', Float32Array.of(1)]]);
    expect(() => o.apply(p, new Map([['a', Float64Array.of(Number.NaN)]]))).toThrow(/NaN or infinite/);
    expect(p.get('a')![0]).toBe(1);
    expect(o.step).toBe(0);
  });

  it('warm-up then constant or cosine, as transformers schedules them', () => {
    const warm = opt({ learningRate: 1, warmupSteps: 10 });
    expect([0, 5, 10, 50].map((s) => learningRateAt(warm, s))).toEqual([0, 0.5, 1, 1]);
    const cosine = opt({ learningRate: 1, warmupSteps: 10, schedule: 'cosine', totalSteps: 20, minLrRatio: 0.1 });
    expect(learningRateAt(cosine, 15)).toBeCloseTo(0.1 + 0.9 * 0.5, 12);
    expect(learningRateAt(cosine, 20)).toBeCloseTo(0.1, 12);
  });

  it('its state survives the checkpoint encoding bit for bit', () => {
    const o = new LoraOptimizer(opt({ learningRate: 0.01 }));
    const p = new Map([['x', Float32Array.of(0.3, -0.2)]]);
    o.apply(p, new Map([['x', Float64Array.of(0.1, 0.7)]]));
    const state = o.state();
    const decoded = decodeOptimizerState(encodeLearnerStateForTest(state));
    expect(decoded.step).toBe(1);
    expect([...decoded.m.get('x')!]).toEqual([...state.m.get('x')!]);
    expect([...decoded.v.get('x')!]).toEqual([...state.v.get('x')!]);
  });
});

function encodeLearnerStateForTest(state: ReturnType<LoraOptimizer['state']>): Buffer {
  // The optimizer half of a learner checkpoint; the adapter half needs a model config, so a
  // minimal one-layer config with a q_proj-only adapter stands in.
  const config = { numLayers: 0 } as Parameters<typeof encodeLearnerState>[0];
  return encodeLearnerState(config, { rank: 1, alpha: 1, targets: ['q_proj'] }, { adapter: new Map(), optimizer: state }).optimizer;
}
