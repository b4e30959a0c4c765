import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { reportCommand, type RunMetricsLine } from '@sqlenv/rollout';

// Hostile or careless files that arrive with a model or a run (issue 23): checkpoints, adapters,
// tokenizers and run directories. Every case must end in an error that names the file (and the
// tensor or field), or in the command working; never a crash, a silent wrong answer, or a
// half-written output.

const scratch = mkdtempSync(join(tmpdir(), 'sqlenv-adversarial-files-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function sink(): Writable & { text: () => string } {
  let text = '';
  const stream = new Writable({ write: (chunk: Buffer, _encoding, done) => ((text += chunk.toString('utf8')), done()) });
  return Object.assign(stream, { text: () => text });
}

function fresh(name: string): string {
  const dir = join(scratch, name);
  mkdirSync(dir, { recursive: true });
  return dir;
}

function metricsLine(version: number): RunMetricsLine {
  return {
    version,
    time: version * 1000,
    episodes: 8,
    reward_mean: Math.sin(version / 100),
    success_rate: (version % 10) / 10,
    format_error_rate: 0,
    mean_tokens: 100 + (version % 7),
    loss: 1 / version,
    kl: 0.01,
    clip_fraction: 0,
    grad_norm: 1,
    learning_rate: 1e-5,
    extra: {},
    non_finite: [],
    staleness_histogram: { '0': 6, [String(version % 3)]: 2 },
    episodes_per_s: 2,
    tokens_per_s: 200,
    // The five phases a trainer records: the phases chart then holds 5 × 30,000 points.
    phase_seconds: { rollout_wait: 0.1, read: 0.01, update: 0.5, commit: 0.02, other: 0.001 },
  };
}

describe('run directories', () => {
  it('sqlenv report on a metrics.jsonl of 30,000 versions writes the report (no stack overflow)', async () => {
    const runDir = fresh('long-run');
    const lines = Array.from({ length: 30_000 }, (_, i) => JSON.stringify(metricsLine(i + 1)));
    writeFileSync(join(runDir, 'metrics.jsonl'), `${lines.join('\n')}\n`);
    const stdout = sink();
    const stderr = sink();
    const code = await reportCommand([runDir], { stdout, stderr });
    expect(stderr.text()).toBe('');
    expect(code).toBe(0);
    expect(stdout.text()).toContain('(30000 versions, 0 evaluations)');
    const html = readFileSync(join(runDir, 'report.html'), 'utf8');
    expect(html).toContain('30000 policy versions recorded, last v30000');
    expect(readdirSync(runDir).sort()).toEqual(['metrics.jsonl', 'report.html']);
  }, 120_000);

  it('a report.html that is a directory: an error naming it, and no temporary file left', async () => {
    const runDir = fresh('report-is-dir');
    writeFileSync(join(runDir, 'metrics.jsonl'), `${JSON.stringify(metricsLine(1))}\n`);
    mkdirSync(join(runDir, 'report.html'));
    const stderr = sink();
    expect(await reportCommand([runDir], { stdout: sink(), stderr })).toBe(2);
    expect(stderr.text()).toContain(`cannot write ${join(runDir, 'report.html')}: it is a directory`);
    expect(readdirSync(runDir).sort()).toEqual(['metrics.jsonl', 'report.html']);
    expect(readdirSync(join(runDir, 'report.html'))).toEqual([]);
  });
});
