import { describe, expect, it } from 'vitest';
import { etaSeconds, formatDuration, progressBar } from './progress.ts';

describe('progress bars', () => {
  it('estimates the time left from the rate so far', () => {
    expect(etaSeconds(25, 100, 10)).toBe(30);
    expect(etaSeconds(100, 100, 10)).toBe(0);
    expect(Number.isNaN(etaSeconds(0, 100, 10))).toBe(true);
    expect(formatDuration(30)).toBe('30s');
    expect(formatDuration(125)).toBe('2m05s');
    expect(formatDuration(Number.NaN)).toBe('--');
  });

  it('draws label, bar, counts, elapsed time and ETA within the width', () => {
    const line = progressBar('SFT', 30, 60, 90, 100, ' steps');
    expect(line).toMatch(/^SFT \[█+░+\] 30\/60 steps · 1m30s · ETA 1m30s$/);
    expect((line.match(/█/g) ?? []).length).toBe((line.match(/░/g) ?? []).length);
    expect(progressBar('Evaluation before', 0, 240, 0, 60)).toContain('ETA --');
    expect(progressBar('x', 5, 5, 3, 40).length).toBeLessThan(40);
  });
});
