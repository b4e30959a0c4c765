import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { claimRunDir, readSavedEvals, RUN_LOCK_FILE, writeRunCommand } from '@sqlenv/runs';
import { main } from '@sqlenv/cli';

/**
 * Issue 35, finding 1: a run directory owns one run. `learn` on a finished run used to read the old
 * run's evaluations, overwrite result.json and truncate sft/steps.jsonl before failing; two learns
 * at once wrote the same files. Each case here failed before the claim existed.
 */
const scratch = mkdtempSync(join(tmpdir(), 'sqlenv-ownership-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function capture(): { stream: NodeJS.WritableStream; text: () => string } {
  let text = '';
  return { stream: { write: (chunk: string | Uint8Array) => ((text += String(chunk)), true) } as unknown as NodeJS.WritableStream, text: () => text };
}

async function cli(args: string[]): Promise<{ code: number; stderr: string; stdout: string }> {
  const out = capture();
  const err = capture();
  const code = await main(args, { stdout: out.stream, stderr: err.stream as NodeJS.WritableStream & { isTTY?: boolean }, env: {} });
  return { code, stdout: out.text(), stderr: err.text() };
}

/** Every file under `dir` with its bytes and modification time, to show nothing was touched. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string): void => {
    for (const name of readdirSync(d)) {
      const path = join(d, name);
      if (statSync(path).isDirectory()) walk(path);
      else out[path] = `${statSync(path).mtimeMs}:${readFileSync(path, 'base64')}`;
    }
  };
  walk(dir);
  return out;
}

/** A finished learning run's directory as `sqlenv learn` leaves it (the files that matter here). */
function finishedLearnRun(dir: string): void {
  mkdirSync(join(dir, 'sft'), { recursive: true });
  mkdirSync(join(dir, 'evals'), { recursive: true });
  writeRunCommand(dir, 'learn', 'train-0ld000', { model: 'm', dataset: 'builtin-heldout' });
  writeFileSync(join(dir, 'sft', 'steps.jsonl'), '{"step":1,"loss":2}\n');
  writeFileSync(join(dir, 'sft', 'train.jsonl'), '{"messages":[]}\n');
  writeFileSync(join(dir, 'result.json'), '{"success_before":0.1,"success_after":0.2,"minutes":14}\n');
  writeFileSync(join(dir, 'run.json'), '{"run_id":"train-0ld000"}\n');
}

describe('run directory ownership', () => {
  const model = join(process.cwd(), 'models', 'sqlenv-tiny');

  it('learn refuses a finished run directory before writing anything, naming the run and the ways on', async () => {
    const dir = join(scratch, 'finished');
    finishedLearnRun(dir);
    const before = snapshot(dir);
    const { code, stdout, stderr } = await cli(['learn', '--model', model, '--run-dir', dir, '--sft-steps', '1', '--episodes', '8']);
    expect(code).toBe(2);
    expect(stderr).toContain(`--run-dir ${dir} holds run train-0ld000 (sqlenv learn, started`);
    expect(stderr).toContain('pass --resume to continue it, --force to replace it');
    // No result line from the old run's evaluations, nothing truncated or rewritten.
    expect(stdout).toBe('');
    expect(snapshot(dir)).toEqual(before);
  });

  it('train refuses a directory another run wrote, and one a live process holds', async () => {
    const other = join(scratch, 'other-train');
    mkdirSync(other);
    writeFileSync(join(other, 'run.json'), '{"run_id":"train-abc123"}\n');
    const refused = await cli(['train', '--run-dir', other, '--episodes', '8', '--group-size', '4']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('holds run train-abc123');

    const held = join(scratch, 'held');
    mkdirSync(held);
    const sleeper = spawn('sleep', ['60']);
    try {
      writeFileSync(join(held, RUN_LOCK_FILE), JSON.stringify({ pid: sleeper.pid, host: hostname(), command: 'learn', started_at: '2026-01-01T00:00:00.000Z' }));
      const busy = await cli(['train', '--run-dir', held, '--episodes', '8', '--group-size', '4']);
      expect(busy.code).toBe(2);
      expect(busy.stderr).toContain(`is in use by sqlenv learn (pid ${sleeper.pid}`);
      // --force never replaces a run that is still running.
      const forced = await cli(['train', '--run-dir', held, '--force', '--episodes', '8', '--group-size', '4']);
      expect(forced.code).toBe(2);
      expect(forced.stderr).toContain('is in use');
    } finally {
      sleeper.kill('SIGKILL');
    }
  });

  it('sft refuses an --out another sft is writing (its lock beside the directory)', async () => {
    const out = join(scratch, 'sft-out');
    const sleeper = spawn('sleep', ['60']);
    try {
      writeFileSync(join(scratch, '.sft-out.lock'), JSON.stringify({ pid: sleeper.pid, host: hostname(), command: 'sft', started_at: '2026-01-01T00:00:00.000Z' }));
      const busy = await cli(['sft', '--model', model, '--data', join(scratch, 'no-data.jsonl'), '--steps', '1', '--out', out]);
      expect(busy.code).toBe(2);
      expect(busy.stderr).toContain(`--out ${out} is in use by sqlenv sft (pid ${sleeper.pid}`);
      expect(existsSync(out)).toBe(false);
    } finally {
      sleeper.kill('SIGKILL');
    }
  });

  it('a stale lock (its process gone) is taken over; two claims at once: one wins', () => {
    const dir = join(scratch, 'stale');
    mkdirSync(dir);
    const gone = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']);
    const deadPid = Number(gone.stdout.toString());
    writeFileSync(join(dir, RUN_LOCK_FILE), JSON.stringify({ pid: deadPid, host: hostname(), command: 'train', started_at: '2026-01-01T00:00:00.000Z' }));
    const claim = claimRunDir(dir, { mode: 'new', command: 'train' });
    expect(JSON.parse(readFileSync(join(dir, RUN_LOCK_FILE), 'utf8'))).toMatchObject({ pid: process.pid, command: 'train' });
    // A second claim while the first holds it (the same process, so the lock is certainly live).
    expect(() => claimRunDir(dir, { mode: 'new', command: 'learn' })).toThrow(/is in use by sqlenv train/);
    claim.release();
    expect(existsSync(join(dir, RUN_LOCK_FILE))).toBe(false);
  });

  it('--force replaces a run whole: the old files go only once the new directory exists', () => {
    const dir = join(scratch, 'forced');
    finishedLearnRun(dir);
    const claim = claimRunDir(dir, { mode: 'force', command: 'learn' });
    expect(readdirSync(dir)).toEqual([RUN_LOCK_FILE]);
    // Nothing left beside it: neither the moved-aside old run nor the temporary new one.
    expect(readdirSync(scratch).filter((name) => name.includes('forced') && name !== 'forced')).toEqual([]);
    claim.release();
  });

  it('--resume needs a run of the same command', () => {
    const empty = join(scratch, 'nothing');
    mkdirSync(empty);
    expect(() => claimRunDir(empty, { mode: 'resume', command: 'learn' })).toThrow(/holds no run to continue/);
    const trainRun = join(scratch, 'a-train-run');
    mkdirSync(trainRun);
    writeRunCommand(trainRun, 'train', 'train-aaaaaa', {});
    expect(() => claimRunDir(trainRun, { mode: 'resume', command: 'learn' })).toThrow(/holds a run of sqlenv train, not of sqlenv learn/);
  });

  it('--resume refuses settings that would change what the run computes', async () => {
    const dir = join(scratch, 'resume-flags');
    mkdirSync(dir);
    writeRunCommand(dir, 'train', 'train-bbbbbb', { episodes: 8, group_size: 4, runDir: dir });
    const { code, stderr } = await cli(['train', '--run-dir', dir, '--resume', '--episodes', '16']);
    expect(code).toBe(2);
    expect(stderr).toContain('--resume continues run train-bbbbbb with its own settings; drop --episodes (the run has 8)');
  });

  it("a result is computed only from the run's own evaluations (the run id is in each file)", () => {
    const dir = join(scratch, 'evals');
    mkdirSync(join(dir, 'evals'), { recursive: true });
    const saved = { schema_version: 1, name: 'before', version: 0, run_id: 'train-000001', dataset: 'builtin', split: 'dev', policy: 'model', seeds: [0], created_at: '2026-01-01T00:00:00.000Z', episodes_count: 0, success_rate: 0, mean_reward: 0, format_error_rate: 0, episodes: [] };
    writeFileSync(join(dir, 'evals', 'before.json'), JSON.stringify(saved));
    expect(readSavedEvals(dir, { runId: 'train-000001' }).map((e) => e.run_id)).toEqual(['train-000001']);
    expect(() => readSavedEvals(dir, { runId: 'train-000002' })).toThrow(/is an evaluation of run train-000001, not of run train-000002/);
  });
});
