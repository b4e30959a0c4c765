import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { groupAdvantages, GRPO_STD_EPS } from './advantages.ts';

describe('groupAdvantages', () => {
  it('normalises by the group std for GRPO and only centres for Dr. GRPO', () => {
    const grpo = groupAdvantages([1, 0, 0, 1], 'grpo');
    expect(grpo.mean).toBe(0.5);
    expect(grpo.std).toBe(0.5);
    expect(grpo.advantages[0]).toBeCloseTo(0.5 / (0.5 + GRPO_STD_EPS), 12);
    expect(grpo.advantages[1]).toBeCloseTo(-0.5 / (0.5 + GRPO_STD_EPS), 12);
    expect(groupAdvantages([1, 0, 0, 1], 'dr_grpo').advantages).toEqual([0.5, -0.5, -0.5, 0.5]);
  });

  it('scales only the negative advantages by the negative weight λ', () => {
    expect(groupAdvantages([1, 0, 0, 1], 'dr_grpo', 0).advantages).toEqual([0.5, 0, 0, 0.5]);
    expect(groupAdvantages([1, 0, 0, 0], 'dr_grpo', 0.5).advantages).toEqual([0.75, -0.125, -0.125, -0.125]);
    const grpo = groupAdvantages([1, 0, 0, 1], 'grpo', 0.25);
    expect(grpo.advantages[0]).toBeCloseTo(0.5 / (0.5 + GRPO_STD_EPS), 12);
    expect(grpo.advantages[1]).toBeCloseTo((0.25 * -0.5) / (0.5 + GRPO_STD_EPS), 12);
    expect(grpo.mean).toBe(0.5); // the statistics are those of the rewards, not of the scaled advantages
  });

  it('flags equal rewards as zero variance with zero advantages', () => {
    const same = groupAdvantages([1.2, 1.2, 1.2], 'grpo');
    expect(same.zeroVariance).toBe(true);
    expect(same.advantages).toEqual([0, 0, 0]);
    expect(groupAdvantages([1.2, 1.3], 'grpo').zeroVariance).toBe(false);
  });

  it('produces advantages that sum to zero (both modes)', () => {
    fc.assert(
      fc.property(fc.array(fc.double({ min: -2, max: 2, noNaN: true }), { minLength: 1, maxLength: 16 }), fc.constantFrom('grpo' as const, 'dr_grpo' as const), (rewards, mode) => {
        const sum = groupAdvantages(rewards, mode).advantages.reduce((s, a) => s + a, 0);
        expect(Math.abs(sum)).toBeLessThan(1e-6 * Math.max(1, rewards.length));
      }),
    );
  });
});
