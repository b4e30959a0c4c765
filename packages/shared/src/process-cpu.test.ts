import { describe, expect, it } from 'vitest';
import { processCpuMs } from './process-cpu.ts';

describe('processCpuMs', () => {
  it.runIf(process.platform === 'linux')('reads a live process and grows as it works', () => {
    const before = processCpuMs(process.pid);
    expect(before).toBeGreaterThanOrEqual(0);
    // Burn CPU until the 10 ms counter moves (bounded, for a very busy machine).
    const until = performance.now() + 5_000;
    let after = before;
    while ((after ?? 0) <= (before as number) && performance.now() < until) after = processCpuMs(process.pid);
    expect(after).toBeGreaterThan(before as number);
  });

  it('is undefined for a process that does not exist', () => {
    expect(processCpuMs(2 ** 22 + 12_345)).toBeUndefined();
  });
});
