import { LoraLearner, parseLearnerConfig, type PolicySample, type SequenceSample } from '@sqlenv/grpo';
import { Generator, parseLoraConfig, presetConfig, randomWeights } from '@sqlenv/model';
import { Xoshiro128 } from '@sqlenv/shared';
import { AdvantageMode } from '@sqlenv/protocol';
import { groupAdvantages } from '@sqlenv/rollout';
import { describe, expect, it } from 'vitest';

/**
 * Learning tests on a tiny random model: the reward can only rise if the whole update is right
 * (sampling → behaviour log-probs → group advantages → training graph → gradients → AdamW → the
 * adapter the sampler uses next).
 */
const config = presetConfig('tiny-qwen3', { numLayers: 1 });
const lora = parseLoraConfig({ rank: 4, alpha: 8, targets: ['q_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] });

describe('GRPO learns a one-turn task', () => {
  it('raises the mean reward from chance to ≥ 0.9 (reward: the sampled token is a lowercase letter)', async () => {
    // The "tool name" is any of the 26 lowercase-letter bytes: about 10 % of the vocabulary, so a random
    // policy earns ~0.1 and a group of 8 usually holds both outcomes.
    const isLetter = (token: number): boolean => token >= 97 && token <= 122;
    const rewardOf = (token: number): number => (isLetter(token) ? 1 : 0);
    // Like the tokens of one tool name, the letters share a direction in embedding space (a random
    // model's embeddings are unrelated, and a norm-bounded hidden state could not single out 26
    // unrelated rows): the adapter has to find that direction.
    const weights = randomWeights(config, { seed: 21, initStd: 0.05 });
    const embed = weights.get('model.embed_tokens.weight')!;
    const direction = new Xoshiro128(8).normalArray(config.hiddenSize, 1 / Math.sqrt(config.hiddenSize));
    for (let v = 0; v < config.vocabSize; v++) {
      if (!isLetter(v)) continue;
      for (let h = 0; h < config.hiddenSize; h++) embed.data[v * config.hiddenSize + h] = embed.data[v * config.hiddenSize + h]! + 0.8 * direction[h]!;
    }
    const prompt = [256, 10, 20, 30, 40];
    const generator = await Generator.create(config, weights, { lora });
    const learner = await LoraLearner.create(config, weights, {
      lora,
      objective: 'policy',
      seed: 1,
      config: parseLearnerConfig({ optimizer: { learningRate: 0.02 }, microBatchTokens: 64 }),
      session: { mode: 'direct' },
    });
    const GROUPS = 4;
    const G = 8;
    const meanRewards: number[] = [];
    let seed = 0;
    try {
      for (let update = 0; update < 40; update++) {
        const adapter = learner.adapter().weights;
        const requests = Array.from({ length: GROUPS * G }, () => ({ promptIds: prompt, seed: seed++, temperature: 1 }));
        const results = await generator.generate(requests, { maxNewTokens: 1, stopIds: [], lora: adapter });
        const rewards = results.map((r) => rewardOf(r.tokens[0]!));
        meanRewards.push(rewards.reduce((a, b) => a + b, 0) / rewards.length);
        if (meanRewards.length >= 3 && meanRewards.slice(-3).every((r) => r >= 0.9)) break;
        const samples: PolicySample[] = [];
        for (let g = 0; g < GROUPS; g++) {
          const { advantages } = groupAdvantages(rewards.slice(g * G, (g + 1) * G), AdvantageMode.GRPO);
          for (let i = 0; i < G; i++) {
            const result = results[g * G + i]!;
            samples.push({
              inputIds: [...prompt, ...result.tokens],
              lossMask: [...prompt.map(() => 0), ...result.tokens.map(() => 1)],
              behaviourLogprobs: [...prompt.map(() => 0), ...result.logprobs],
              advantage: advantages[i]!,
              temperature: 1,
            });
          }
        }
        const report = await learner.policyUpdate(samples);
        expect(Number.isFinite(report.loss)).toBe(true);
        // One pass: the proximal policy is the sampler's, so nothing is clipped and the importance
        // weights sit at 1 (the sampler's log-probs match the trainer's).
        expect(report.clipFraction).toBe(0);
        expect(report.truncatedFraction).toBe(0);
      }
    } finally {
      await generator.close();
      await learner.close();
    }
    expect(meanRewards[0]!).toBeLessThan(0.4);
    expect(meanRewards.slice(-3).every((r) => r >= 0.9)).toBe(true);
  }, 120_000);
});

describe('SFT', () => {
  for (const parameters of ['lora', 'full'] as const) {
    it(`drives the loss of a fixed batch down at least 10x (${parameters === 'lora' ? 'LoRA adapter' : 'every base weight'})`, async () => {
      const sftConfig = presetConfig('tiny-qwen3', { numLayers: 2 });
      // Larger embeddings than the default init: a token's logit is bounded by |hidden|·|embedding|
      // while the embedding is frozen (LoRA).
      const weights = randomWeights(sftConfig, { seed: 22, initStd: 0.2 });
      const rng = new Xoshiro128(4);
      const batch: SequenceSample[] = Array.from({ length: 4 }, () => {
        const prompt = Array.from({ length: 6 }, () => 32 + Math.floor(rng.uniform() * 90));
        const answer = Array.from({ length: 8 }, () => 32 + Math.floor(rng.uniform() * 90));
        return { inputIds: [256, ...prompt, ...answer], lossMask: [0, ...prompt.map(() => 0), ...answer.map(() => 1)] };
      });
      const learner = await LoraLearner.create(sftConfig, weights, {
        lora: parseLoraConfig({ rank: 8, alpha: 16 }),
        parameters,
        objective: 'sft',
        config: parseLearnerConfig({ optimizer: { learningRate: 0.01 } }),
        session: { mode: 'direct' },
      });
      try {
        const first = await learner.evaluateLoss(batch);
        let last = first;
        for (let step = 0; step < 150 && last > first / 10; step++) {
          const report = await learner.sftUpdate(batch);
          expect(report.loss).toBeCloseTo(last, 4); // the reported loss is the batch's before the step
          last = await learner.evaluateLoss(batch);
        }
        expect(first).toBeGreaterThan(4); // ≈ ln(vocab) for a random model
        expect(last).toBeLessThan(first / 10);
        if (parameters === 'full') {
          // Every base tensor moved (the embedding included), and nothing else is trained.
          const trained = learner.weights();
          expect([...trained.keys()].sort()).toEqual([...weights.keys()].sort());
          for (const [name, values] of trained) expect(values.some((v, i) => v !== weights.get(name)!.data[i]), name).toBe(true);
        }
      } finally {
        await learner.close();
      }
    }, 120_000);
  }
});
