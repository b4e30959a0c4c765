import { describe, expect, it } from 'vitest';
import { prepackingDecision, PREPACKING_MAX_WEIGHT_BYTES, weightBytes } from './prepacking.ts';
import { presetConfig } from '../io/presets.ts';
import { randomWeights } from '../io/random-checkpoint.ts';
import { Generator, generationSessionConfig } from './generator.ts';

describe('weight pre-packing decided by size', () => {
  it('stays on up to the threshold and goes off above it', () => {
    expect(prepackingDecision(8 * 2 ** 20)).toEqual({ prepacking: true, decidedBy: 'size', weightBytes: 8 * 2 ** 20, thresholdBytes: PREPACKING_MAX_WEIGHT_BYTES });
    expect(prepackingDecision(PREPACKING_MAX_WEIGHT_BYTES).prepacking).toBe(true);
    expect(prepackingDecision(PREPACKING_MAX_WEIGHT_BYTES + 1).prepacking).toBe(false);
    // Qwen3-0.6B's float32 weights: 2.4 GB.
    expect(prepackingDecision(2.4e9)).toMatchObject({ prepacking: false, decidedBy: 'size' });
    expect(prepackingDecision(100, undefined, 50).prepacking).toBe(false);
  });

  it('an explicit option wins either way', () => {
    expect(prepackingDecision(8, true)).toMatchObject({ prepacking: false, decidedBy: 'option' });
    expect(prepackingDecision(2.4e9, false)).toMatchObject({ prepacking: true, decidedBy: 'option' });
  });

  it('counts the float32 bytes of a checkpoint', () => {
    const config = presetConfig('tiny-qwen3');
    const weights = randomWeights(config, { seed: 1 });
    let values = 0;
    for (const w of weights.values()) values += w.data.length;
    expect(weightBytes(weights)).toBe(values * 4);
  });

  it('turns the memory pattern off for weights above the threshold and keeps the CPU arena on, unless set explicitly', async () => {
    const small = generationSessionConfig(prepackingDecision(8 * 2 ** 20));
    expect(small).toEqual({ mode: 'direct', sessionConfig: { 'session.disable_prepacking': '0' } });
    const big = generationSessionConfig(prepackingDecision(2.4e9), { intraOpThreads: 2 });
    expect(big).toEqual({ mode: 'direct', memoryPattern: false, intraOpThreads: 2, sessionConfig: { 'session.disable_prepacking': '1' } });
    expect(generationSessionConfig(prepackingDecision(2.4e9), { cpuMemArena: false })).toMatchObject({ cpuMemArena: false, memoryPattern: false });
    // An explicit setting reaches the session, and its record says so.
    const config = presetConfig('tiny-qwen3');
    const generator = await Generator.create(config, randomWeights(config, { seed: 1 }), { session: { cpuMemArena: false } });
    try {
      expect(generator.sessionRecord['cpuMemArena']).toBe(false);
    } finally {
      await generator.close();
    }
  });

  it('reaches the generation session: by size, by the option, by an explicit session entry', async () => {
    const config = presetConfig('tiny-qwen3');
    const cases = [
      [{}, '0', 'size'],
      [{ disablePrepacking: true }, '1', 'option'],
      [{ session: { sessionConfig: { 'session.disable_prepacking': '1' } } }, '1', 'option'],
    ] as const;
    for (const [options, entry, decidedBy] of cases) {
      const generator = await Generator.create(config, randomWeights(config, { seed: 1 }), options);
      try {
        const record = generator.sessionRecord;
        expect(record['sessionConfig']).toEqual({ 'session.disable_prepacking': entry });
        expect(record['prepacking']).toMatchObject({ prepacking: entry === '0', decidedBy });
      } finally {
        await generator.close();
      }
    }
  });
});
