import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, describe, expect, it } from 'vitest';

/**
 * docker/gpu-entry.sh is how every GPU container picks its GPU (docs/operations.md): replicas of one
 * service get identical config, so the selection happens at start through per-GPU flock files on a
 * volume shared by the host's containers. These tests run the real script with a fake GPU count.
 */
const script = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../docker/gpu-entry.sh');
const lockDir = mkdtempSync(path.join(tmpdir(), 'sqlenv-gpu-locks-'));
const children: ChildProcess[] = [];

interface Replica {
  child: ChildProcess;
  /** Resolves with the CUDA_VISIBLE_DEVICES the command saw (or null when the script refused). */
  gpu: Promise<string | null>;
  exited: Promise<number | null>;
  stderr: () => string;
}

/** One "container": the entry script running a command that prints its GPU and then holds it. */
function replica(env: Record<string, string>, holdS = 30): Replica {
  const child = spawn('bash', [script, 'bash', '-c', `echo "gpu=$CUDA_VISIBLE_DEVICES order=$CUDA_DEVICE_ORDER"; exec sleep ${holdS}`], {
    env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', SQLENV_GPU_COUNT: '4', SQLENV_GPU_LOCK_DIR: lockDir, SQLENV_GPU_WAIT_S: '1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const gpu = new Promise<string | null>((resolve) => {
    let out = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = /gpu=(\d*) order=(\S*)/.exec(out);
      // A claimed GPU comes with PCI bus ordering (nvidia-smi's numbering); the CPU path sets neither.
      if (match) resolve(match[1] === '' ? '' : match[2] === 'PCI_BUS_ID' ? (match[1] ?? null) : `${match[1]} without PCI_BUS_ID order`);
    });
    void exited.then(() => resolve(null));
  });
  return { child, gpu, exited, stderr: () => stderr };
}

afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await new Promise((resolve) => child.once('exit', resolve));
    }
  }
});

afterAll(() => rmSync(lockDir, { recursive: true, force: true }));

describe('docker/gpu-entry.sh: one GPU per replica', () => {
  it('gives four replicas of one service four different GPUs, and refuses a fifth with a clear error', async () => {
    const replicas = [replica({}), replica({}), replica({}), replica({})];
    const gpus = await Promise.all(replicas.map((r) => r.gpu));
    expect(new Set(gpus)).toEqual(new Set(['0', '1', '2', '3']));
    const fifth = replica({});
    expect(await fifth.exited).toBe(75);
    expect(fifth.stderr()).toMatch(/every GPU this container may use is claimed/);
  }, 30_000);

  it('hands a dead replica\'s GPU to its replacement (the kernel drops the lock with the process)', async () => {
    const first = [replica({}), replica({})];
    const [a, b] = await Promise.all(first.map((r) => r.gpu));
    first[0]?.child.kill('SIGKILL');
    await first[0]?.exited;
    const replacement = replica({ SQLENV_GPU_COUNT: '2', SQLENV_GPU_WAIT_S: '10' });
    expect(await replacement.gpu).toBe(a);
    expect(b).not.toBe(a);
  }, 30_000);

  it('keeps the trainers\' GPUs out of the workers\' pool', async () => {
    const trainer = replica({ SQLENV_GPUS: '0' });
    expect(await trainer.gpu).toBe('0');
    const workers = [replica({ SQLENV_GPUS_EXCLUDE: '0' }), replica({ SQLENV_GPUS_EXCLUDE: '0' }), replica({ SQLENV_GPUS_EXCLUDE: '0' })];
    expect(new Set(await Promise.all(workers.map((w) => w.gpu)))).toEqual(new Set(['1', '2', '3']));
    // A second run's trainer waits for a trainer GPU; it does not take a worker's.
    const secondTrainer = replica({ SQLENV_GPUS: '0' });
    expect(await secondTrainer.exited).toBe(75);
    // With two trainer GPUs reserved, two runs each get their own.
    const ranged = replica({ SQLENV_GPUS: '0-1', SQLENV_GPUS_EXCLUDE: '', SQLENV_GPU_LOCK_DIR: mkdtempSync(path.join(lockDir, 'r-')) });
    expect(await ranged.gpu).toBe('0');
  }, 30_000);

  it('fails loudly when CUDA is asked for and no GPU is visible, and passes through on CPU', async () => {
    const none = replica({ SQLENV_GPU_COUNT: '0' });
    expect(await none.exited).toBe(69);
    expect(none.stderr()).toMatch(/CUDA was asked for .* sees no GPU/);
    const bad = replica({ SQLENV_GPUS: '1,x' });
    expect(await bad.exited).toBe(64);
    expect(bad.stderr()).toMatch(/bad GPU list in SQLENV_GPUS/);
    const cpu = replica({ SQLENV_EXECUTION_PROVIDER: 'cpu' }, 0);
    expect(await cpu.gpu).toBe('');
  }, 30_000);
});
