import { describe, expect, it } from 'vitest';
import { presetConfig } from '@sqlenv/model';
import { memoryLimitFrom } from '@sqlenv/shared';
import { microBatchActivationBytes, MIN_MICRO_BATCH_TOKENS, planLearnerMemory } from './learner-memory.ts';

/** A memory limit as the limit reader returns it: a container's cgroup v2 limit of `bytes` under a large host. */
function containerLimit(size: number) {
  const bytes = Math.round(size);
  return memoryLimitFrom({ hostBytes: 256 * 2 ** 30, constrainedBytes: bytes, procSelfCgroup: '0::/job\n', readFile: (path) => (path.endsWith('/job/memory.max') ? `${bytes}\n` : undefined) });
}

describe('the learner micro-batch follows the memory limit (issue 35, finding 2)', () => {
  const qwen = presetConfig('qwen3-0.6b');
  const lora = { rank: 16, targets: ['q_proj', 'k_proj', 'v_proj', 'o_proj'] as const };
  const input = { config: qwen, lora, microBatchTokens: 4096, recompute: 'auto' as const, explicit: false };

  it('keeps the default on a large machine, and recomputes layers where the kept activations pass 2 GiB', () => {
    const plan = planLearnerMemory({ ...input, limit: containerLimit(128 * 2 ** 30) });
    expect(plan).toMatchObject({ microBatchTokens: 4096, recompute: 'layer', reduced: false });
  });

  it('shrinks a default micro-batch to what half of the rest of a container limit holds', () => {
    const limit = containerLimit(4 * 2 ** 30);
    const plan = planLearnerMemory({ ...input, limit });
    expect(plan.reduced).toBe(true);
    expect(plan.microBatchTokens).toBeLessThan(4096);
    expect(plan.microBatchTokens).toBeGreaterThanOrEqual(MIN_MICRO_BATCH_TOKENS);
    expect(plan.activationBytes).toBeLessThanOrEqual(plan.budgetBytes);
    // The next size up would not have fit: the plan takes the largest power-of-two step that does.
    expect(microBatchActivationBytes(qwen, plan.microBatchTokens * 2, 'layer')).toBeGreaterThan(plan.budgetBytes);
    expect(plan.budgetBytes).toBeCloseTo((limit.bytes - plan.fixedBytes) / 2, -3);
  });

  it('refuses with the numbers when nothing fits, and never shrinks a micro-batch the run set', () => {
    expect(() => planLearnerMemory({ ...input, limit: containerLimit(2.3 * 2 ** 30) })).toThrow(/^the learner does not fit in the cgroup v2 memory\.max limit \(\/sys\/fs\/cgroup\/job\/memory\.max\), 2\.47 GB: weights, adapter, gradient and AdamW moments 2\.\d+ GB, and a micro-batch of 256 tokens keeps/);
    expect(() => planLearnerMemory({ ...input, explicit: true, limit: containerLimit(4 * 2 ** 30) })).toThrow(/a micro-batch of 4096 tokens .*lower the learner's microBatchTokens/);
  });
});
