import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { readResumePoint, readRunMetrics, readSavedEvals } from '@sqlenv/runs';

/**
 * Issue 35, finding 4: interrupting a training run keeps its work. SIGINT used to end `learn` with
 * exit 130, no message, no adapter and no report, and the directory could not be continued. Here a
 * real `sqlenv train` process on the shipped tiny checkpoint is stopped once it has committed a
 * version, then continued with --resume to the end.
 */
const bin = fileURLToPath(new URL('../apps/cli/bin/sqlenv.js', import.meta.url));
const model = fileURLToPath(new URL('../models/sqlenv-tiny', import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), 'sqlenv-interrupt-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

interface Finished {
  code: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
  stdout: string;
}

/** Start `sqlenv args`; `stopWhen` is polled, and once true the process gets `signals` (one by one, 50 ms apart). */
function sqlenv(args: string[], stop?: { when: () => boolean; signals: NodeJS.Signals[] }): Promise<Finished> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, ...args], { env: { ...process.env, SQLENV_CACHE_DIR: join(scratch, 'cache'), LOG_LEVEL: 'warn' } });
    let stderr = '';
    let stdout = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    let timer: NodeJS.Timeout | undefined;
    if (stop !== undefined) {
      timer = setInterval(() => {
        if (!stop.when()) return;
        clearInterval(timer);
        stop.signals.forEach((signal, i) => setTimeout(() => child.kill(signal), 50 * i));
      }, 100);
    }
    child.on('exit', (code, signal) => {
      if (timer) clearInterval(timer);
      resolve({ code, signal, stderr, stdout });
    });
  });
}

const trainArgs = (runDir: string): string[] => [
  'train', '--policy', 'model', '--model', model, '--run-dir', runDir, '--episodes', '64', '--group-size', '4', '--groups-per-batch', '1',
  '--max-staleness', '0', '--concurrency', '4', '--max-new-tokens', '12', '--temperature', '1.5', '--eval-episodes', '2', '--progress', 'off',
];

describe('an interrupted training run keeps its work and continues with --resume', () => {
  it('SIGTERM after a committed version: exit 143, adapter + metrics + report + learner state kept; --resume finishes the run', async () => {
    const runDir = join(scratch, 'run');
    const stopped = await sqlenv(trainArgs(runDir), { when: () => existsSync(join(runDir, 'metrics.jsonl')) && readRunMetrics(runDir).length >= 1, signals: ['SIGTERM'] });
    expect(stopped.code, stopped.stderr).toBe(143);
    const kept = readRunMetrics(runDir).map((line) => line.version);
    const last = kept.at(-1) ?? 0;
    expect(last).toBeGreaterThanOrEqual(1);
    expect(stopped.stderr).toContain(`stopped by SIGTERM at policy version ${last}`);
    expect(stopped.stderr).toContain(`continue it with: sqlenv train --run-dir ${runDir} --resume`);
    expect(existsSync(join(runDir, 'adapters', `v${last}`, 'adapter_model.safetensors'))).toBe(true);
    expect(existsSync(join(runDir, 'report.html'))).toBe(true);
    const point = readResumePoint(runDir);
    expect(point?.point).toMatchObject({ version: last, reason: 'SIGTERM' });
    // The learner's AdamW state travels with it, so the resumed updates continue the same optimizer.
    expect(Object.keys(point?.parts ?? {})).toEqual(['optimizer']);
    expect(point?.point.episodes_done).toBeGreaterThanOrEqual(4 * last);
    expect(readSavedEvals(runDir).map((e) => e.name)).toEqual(['before']);
    // The lock went with its process.
    expect(existsSync(join(runDir, 'run.lock'))).toBe(false);

    const resumed = await sqlenv(['train', '--run-dir', runDir, '--resume', '--progress', 'off']);
    expect(resumed.code, resumed.stderr).toBe(0);
    const versions = readRunMetrics(runDir).map((line) => line.version);
    // The versions continue where the stopped part ended, one metrics line each.
    expect(versions.slice(0, kept.length)).toEqual(kept);
    expect(versions).toEqual(versions.map((_, i) => i + 1));
    // The resumed part played the episodes left (every one of its groups trained or dropped).
    expect(Number(/(\d+) completed/.exec(resumed.stdout)?.[1])).toBeGreaterThan(0);
    const evals = readSavedEvals(runDir);
    expect(evals.map((e) => e.name)).toEqual(['before', 'after']);
    expect(evals[1]?.version).toBe(versions.at(-1));
    expect(new Set(evals.map((e) => e.run_id)).size).toBe(1);
    expect(existsSync(join(runDir, 'checkpoint'))).toBe(false);
    expect(existsSync(join(runDir, 'adapters', `v${versions.at(-1)}`))).toBe(true);
    // Nothing else to continue now.
    const again = await sqlenv(['train', '--run-dir', runDir, '--resume']);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain('finished; nothing is left to continue');
  }, 600_000);

  it('sqlenv learn: SIGINT during GRPO exits 130 saying how to continue; --resume keeps SFT and the before evaluation and prints the result line', async () => {
    const runDir = join(scratch, 'learn');
    const args = ['learn', '--model', model, '--run-dir', runDir, '--sft-steps', '1', '--sft-batch-size', '2', '--episodes', '64', '--group-size', '4', '--groups-per-batch', '1', '--max-staleness', '0', '--max-new-tokens', '12', '--concurrency', '4', '--eval-questions', '2', '--eval-seeds', '1', '--temperature', '1.5'];
    const stopped = await sqlenv(args, { when: () => existsSync(join(runDir, 'metrics.jsonl')) && readRunMetrics(runDir).length >= 1, signals: ['SIGINT'] });
    expect(stopped.code, stopped.stderr).toBe(130);
    expect(stopped.stderr).toContain(`continue it with: sqlenv learn --run-dir ${runDir} --resume`);
    // No result line from a run that did not finish.
    expect(stopped.stdout).toBe('');
    const resumed = await sqlenv(['learn', '--run-dir', runDir, '--resume']);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stderr).toContain('SFT: kept from the run');
    expect(resumed.stderr).toContain('(resumed from its checkpoint)');
    const result = JSON.parse(resumed.stdout.trim().split('\n').at(-1) ?? '') as { episodes_per_eval: number };
    expect(result.episodes_per_eval).toBe(2);
    const evals = readSavedEvals(runDir);
    expect(evals.find((e) => e.name === 'after')?.version).toBe(readRunMetrics(runDir).at(-1)?.version);
  }, 600_000);

  it('a second signal exits at once and leaves nothing half-written', async () => {
    const runDir = join(scratch, 'twice');
    const stopped = await sqlenv(trainArgs(runDir), { when: () => existsSync(join(runDir, 'evals')), signals: ['SIGINT', 'SIGINT'] });
    expect(stopped.code, stopped.stderr).toBe(130);
    // No temporary files of an atomic write, no lock; a checkpoint, if one was written, is whole.
    expect(readdirSync(runDir).filter((name) => name.endsWith('.tmp') || name === 'run.lock')).toEqual([]);
    if (existsSync(join(runDir, 'checkpoint'))) expect(readResumePoint(runDir)?.point.run_id).toBeTruthy();
  }, 300_000);
});
