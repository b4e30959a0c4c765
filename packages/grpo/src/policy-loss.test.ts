import { createSession, Graph, gradients, tensor } from '@sqlenv/onnx-graph';
import { describe, expect, it } from 'vitest';
import { PolicyLossConfigSchema, type PolicyLossConfig } from './config.ts';
import { planMicroBatches, tokenWeights } from './micro-batches.ts';
import { policyLoss } from './policy-loss.ts';

/** Run the loss pieces on given per-token values (one row of 6 tokens). */
async function lossOf(values: { logp: number[]; prox: number[]; behaviour: number[]; adv: number[]; w: number[]; ref?: number[] }, config: PolicyLossConfig) {
  const g = new Graph();
  const T = values.logp.length;
  const input = (name: string): ReturnType<Graph['input']> => g.input(name, 'float64', [1, T]);
  const logp = input('logp');
  const out = policyLoss(
    g,
    { logprobs: logp, proxLogprobs: input('prox'), behaviourLogprobs: input('behaviour'), advantages: input('adv'), tokenWeights: input('w'), ...(values.ref ? { refLogprobs: input('ref') } : {}) },
    config,
  );
  g.output('loss', out.loss);
  g.output('clipped', out.clippedTokens);
  g.output('truncated', out.truncatedTokens);
  g.output('kl', out.kl);
  g.output('dlogp', gradients(out.loss, [logp])[0]!);
  const session = await createSession(g.toModel(), { mode: 'direct' });
  const feed = (v: number[]) => tensor('float64', [1, T], Float64Array.from(v));
  const result = await session.run({ logp: feed(values.logp), prox: feed(values.prox), behaviour: feed(values.behaviour), adv: feed(values.adv), w: feed(values.w), ...(values.ref ? { ref: feed(values.ref) } : {}) });
  await session.close();
  const scalar = (k: string): number => (result[k]!.data as Float64Array)[0]!;
  return { loss: scalar('loss'), clipped: scalar('clipped'), truncated: scalar('truncated'), kl: scalar('kl'), dlogp: [...(result['dlogp']!.data as Float64Array)] };
}

const ln = Math.log;

describe('policy loss against hand-computed values', () => {
  const config = PolicyLossConfigSchema.parse({ epsLow: 0.2, epsHigh: 0.28, importanceCap: 2 });

  it('clips the ratio on both sides, only where the clipped term is the smaller one', async () => {
    // Tokens: ρ = 1.5 with A > 0 (clipped to 1.28), ρ = 1.5 with A < 0 (not clipped: min picks ρ·A),
    // ρ = 0.5 with A < 0 (clipped to 0.8), ρ = 0.5 with A > 0 (not clipped), ρ = 1 (inside), and a
    // masked token whose huge difference must not matter.
    const prox = [-1, -1, -1, -1, -1, -50];
    const logp = [-1 + ln(1.5), -1 + ln(1.5), -1 + ln(0.5), -1 + ln(0.5), -1, 40];
    const adv = [2, -2, -1, 1, 3, 5];
    const w = [0.2, 0.2, 0.2, 0.2, 0.2, 0];
    const r = await lossOf({ logp, prox, behaviour: prox, adv, w }, config);
    // IS = 1 everywhere (behaviour = prox). Per token: 1.28·2, 1.5·(−2), 0.8·(−1), 0.5·1, 1·3.
    const expected = -0.2 * (1.28 * 2 + 1.5 * -2 + 0.8 * -1 + 0.5 * 1 + 3);
    expect(r.loss).toBeCloseTo(expected, 12);
    expect(r.clipped).toBe(2);
    expect(r.truncated).toBe(0);
    expect(r.kl).toBe(0);
  });

  it('weights each token by π_prox/π_behaviour, truncated at the cap', async () => {
    const logp = [-1, -2, -0.5];
    const prox = [-1, -2, -0.5];
    const behaviour = [-1 - ln(3), -2 + ln(2), -0.5 - ln(1.5)]; // weights 3 (→ cap 2), 0.5, 1.5
    const adv = [1, 1, -1];
    const w = [1 / 3, 1 / 3, 1 / 3];
    const r = await lossOf({ logp, prox, behaviour, adv, w }, config);
    expect(r.loss).toBeCloseTo(-(1 / 3) * (2 * 1 + 0.5 * 1 + 1.5 * -1), 12);
    expect(r.truncated).toBe(1);
  });

  it('truncated IS: the weight equals the cap where π_prox/π_behaviour exceeds it, and is a constant in the gradient', async () => {
    // ρ = 1 (π_θ = π_prox, the first pass of an update), so ℓ = IS·A and dℓ/dlogπ_θ = IS·ρ·A = IS·A:
    // the gradient sees IS as a factor only, never differentiates it.
    const logp = [-1, -2, -0.5, -3];
    const behaviour = [-1 - ln(5), -2 - ln(1.25), -0.5 + ln(4), -3 - ln(2)]; // ratios 5 (→ 2), 1.25, 0.25, 2 (not above the cap)
    const adv = [1, -2, 0.5, 1];
    const w = [0.25, 0.25, 0.25, 0.25];
    const is = [2, 1.25, 0.25, 2];
    const r = await lossOf({ logp, prox: logp, behaviour, adv, w }, config);
    expect(r.loss).toBeCloseTo(-0.25 * (2 * 1 + 1.25 * -2 + 0.25 * 0.5 + 2 * 1), 12);
    r.dlogp.forEach((d, t) => expect(d).toBeCloseTo(-w[t]! * is[t]! * adv[t]!, 12));
    expect(r.truncated).toBe(1);
  });

  it('cap 0 turns the weight off (IS = 1 on every token, nothing truncated); sampler and learner agreeing make the default cap a no-op', async () => {
    const logp = [-1, -2, -0.5];
    const behaviour = [-1 - ln(3), -2 + ln(2), -0.5];
    const adv = [1, 1, -1];
    const w = [1 / 3, 1 / 3, 1 / 3];
    const off = await lossOf({ logp, prox: logp, behaviour, adv, w }, PolicyLossConfigSchema.parse({ importanceCap: 0 }));
    const plain = -(1 / 3) * (1 + 1 - 1);
    expect(off.loss).toBeCloseTo(plain, 12);
    expect(off.truncated).toBe(0);
    off.dlogp.forEach((d, t) => expect(d).toBeCloseTo(-w[t]! * adv[t]!, 12));
    const agreeing = await lossOf({ logp, prox: logp, behaviour: logp, adv, w }, PolicyLossConfigSchema.parse({}));
    expect(agreeing.loss).toBe(off.loss);
    expect(agreeing.dlogp).toEqual(off.dlogp);
    expect(PolicyLossConfigSchema.safeParse({ importanceCap: Number.POSITIVE_INFINITY }).success).toBe(false);
    expect(PolicyLossConfigSchema.safeParse({ importanceCap: -1 }).success).toBe(false);
  });

  it('subtracts β·k3 with k3 = exp(ref − logp) − (ref − logp) − 1, and reports Σ w·k3', async () => {
    const logp = [-1, -2];
    const ref = [-1.5, -1];
    const adv = [0.5, -0.5];
    const w = [0.5, 0.5];
    const beta = 0.1;
    const r = await lossOf({ logp, prox: logp, behaviour: logp, adv, w, ref }, PolicyLossConfigSchema.parse({ klBeta: beta }));
    const k3 = (d: number): number => Math.exp(d) - d - 1;
    const kl = 0.5 * k3(-0.5) + 0.5 * k3(1);
    expect(r.kl).toBeCloseTo(kl, 12);
    expect(r.loss).toBeCloseTo(-(0.5 * 0.5 + 0.5 * -0.5) + beta * kl, 12);
  });
});

describe('batch normalisation and micro-batches', () => {
  const samples = [
    { inputIds: [1, 2, 3, 4], lossMask: [0, 1, 1, 1] },
    { inputIds: [1, 2], lossMask: [0, 1] },
  ];

  it('token: one weight for every loss token of the batch; sequence: per-episode means; dr_grpo: a constant', () => {
    expect(tokenWeights(samples, 'token', 10)).toEqual([[0, 0.25, 0.25, 0.25], [0, 0.25]]);
    expect(tokenWeights(samples, 'sequence', 10)).toEqual([[0, 1 / 6, 1 / 6, 1 / 6], [0, 0.5]]);
    expect(tokenWeights(samples, 'dr_grpo', 10)).toEqual([[0, 0.05, 0.05, 0.05], [0, 0.05]]);
  });

  it('packs rows longest first under the padded-token budget, one temperature per micro-batch', () => {
    expect(planMicroBatches([3, 8, 5, 2], 16)).toEqual([[1, 2], [0, 3]]);
    expect(planMicroBatches([3, 8, 5, 2], 4)).toEqual([[1], [2], [0], [3]]); // longer than the budget: alone
    expect(planMicroBatches([3, 3, 3], 100, [1, 0.7, 1])).toEqual([[1], [0, 2]]);
  });
});
