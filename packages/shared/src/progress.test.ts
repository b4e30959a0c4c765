import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { etaSeconds, formatDuration, PhaseProgress, progressLine, progressMode } from './progress.ts';

function sink(): Writable & { text: () => string } {
  const chunks: string[] = [];
  const stream = new Writable({ write: (chunk, _enc, done) => (chunks.push(String(chunk)), done()) });
  return Object.assign(stream, { text: () => chunks.join('') });
}

describe('progress', () => {
  it('estimates the time left from the rate so far', () => {
    expect(etaSeconds(25, 100, 10)).toBe(30);
    expect(etaSeconds(100, 100, 10)).toBe(0);
    expect(Number.isNaN(etaSeconds(0, 100, 10))).toBe(true);
    expect(formatDuration(30)).toBe('30s');
    expect(formatDuration(125)).toBe('2m05s');
    expect(formatDuration(Number.NaN)).toBe('--');
  });

  it('draws label, bar, counts, elapsed time and ETA within the width', () => {
    const line = progressLine('SFT', 30, 60, 90, 100, ' steps');
    expect(line).toMatch(/^SFT \[█+░+\] 30\/60 steps · 1m30s · ETA 1m30s$/);
    expect((line.match(/█/g) ?? []).length).toBe((line.match(/░/g) ?? []).length);
    expect(progressLine('Evaluation before', 0, 240, 0, 60)).toContain('ETA --');
    expect(progressLine('x', 5, 5, 3, 40).length).toBeLessThan(40);
  });

  it('auto is a bar on a terminal and nothing elsewhere', () => {
    expect(progressMode('auto', { isTTY: true })).toBe('bar');
    expect(progressMode('auto', {})).toBe('off');
    expect(progressMode('lines', { isTTY: true })).toBe('lines');
  });

  it('lines: one line per new tenth short of the end, then the last line on finish', () => {
    const out = sink();
    const progress = new PhaseProgress('phase', out, 'lines');
    for (let done = 0; done <= 40; done++) progress.draw(`at ${done}`, done, 40);
    progress.finish();
    expect(out.text().trim().split('\n')).toEqual(['at 0', 'at 4', 'at 8', 'at 12', 'at 16', 'at 20', 'at 24', 'at 28', 'at 32', 'at 36', 'at 40']);
  });

  it('bar: redrawn in place, the end always drawn, finished on a line of its own; off writes nothing', () => {
    const out = sink();
    const progress = new PhaseProgress('phase', out, 'bar');
    progress.update(1, 3);
    progress.update(3, 3);
    progress.finish();
    const text = out.text();
    expect(text.startsWith('\rphase [')).toBe(true);
    expect(text).toMatch(/\rphase \[█+\] 3\/3 · \d+s · ETA 0s\n$/);
    expect(text.split('\n')).toHaveLength(2);
    const quiet = sink();
    const off = new PhaseProgress('phase', quiet, 'off');
    off.update(1, 2);
    off.finish();
    expect(quiet.text()).toBe('');
  });
});
