import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InferenceEngine, parseModelConfig, modelFingerprint, writeRandomCheckpoint } from '@sqlenv/model';
import { TINY_BYTE_MODEL_CONFIG } from '@sqlenv/model/testing';
import { RolloutRunSpecSchema } from '@sqlenv/protocol';
import { createRunResolver, policyUpdaterFor, RuntimeCache } from '@sqlenv/rollout';
import { modelSpecFrom } from '@sqlenv/cli';
import { main } from '@sqlenv/cli';
import type { CommandIo } from '@sqlenv/cli';

/**
 * One setting reaches every ONNX Runtime session a command creates (issue 20): each command path
 * runs in process with a logger that keeps its records, and every `session created` record must
 * carry the provider and the intra-op threads the command was given (by flag, by environment
 * variable, or the machine's cores by default). And a command asked for a GPU provider this
 * machine cannot load (no Vulkan driver for WebGPU, no CUDA libraries) exits non-zero with the reason.
 */
// The refusals below need a WebGPU provider that cannot start. A machine with a Vulkan driver (Mesa's
// software one included) can start it, so the Vulkan loader of this test process is pointed at no
// driver; packages/model/src/runtime/webgpu.test.ts runs the provider where a driver exists.
process.env['VK_DRIVER_FILES'] = join(tmpdir(), 'no-vulkan-driver.json');
process.env['VK_ICD_FILENAMES'] = process.env['VK_DRIVER_FILES'];
const scratch = mkdtempSync(join(tmpdir(), 'execution-settings-'));
const modelDir = join(scratch, 'model');
const sftData = join(scratch, 'sft.jsonl');
const cores = availableParallelism();
/** A thread count the default does not produce here (fewer than the cores, so the tests do not oversubscribe them). */
const ASKED = cores === 1 ? 2 : 1;

interface Captured {
  io: Partial<CommandIo>;
  records: () => Record<string, unknown>[];
  stderr: () => string;
}

function capture(env: Record<string, string> = {}): Captured {
  const lines: string[] = [];
  let stderr = '';
  const logger: Logger = pino({ level: 'info' }, new Writable({ write: (chunk: Buffer, _enc, done) => (lines.push(chunk.toString()), done()) }));
  const sink = (append: (text: string) => void): NodeJS.WriteStream => new Writable({ write: (chunk: Buffer, _enc, done) => (append(chunk.toString()), done()) }) as unknown as NodeJS.WriteStream;
  return {
    io: { logger, env: { ...process.env, ...env }, stdout: sink(() => undefined), stderr: sink((t) => (stderr += t)) },
    records: () => lines.flatMap((l) => l.split('\n')).filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as Record<string, unknown>),
    stderr: () => stderr,
  };
}

/** The `session created` records by role (engine, learner, sft, logits, generate). */
function sessions(c: Captured): Record<string, unknown>[] {
  return c.records().filter((r) => r['msg'] === 'session created');
}

function expectSessions(c: Captured, roles: string[], threads: number): void {
  const created = sessions(c);
  expect(created.map((r) => r['role']).sort(), c.stderr()).toEqual([...roles].sort());
  for (const r of created) expect([r['role'], r['executionProvider'], r['intraOpThreads']]).toEqual([r['role'], 'cpu', threads]);
}

beforeAll(async () => {
  // The byte tokenizer needs a long context: the agent's system turn alone is ~1,200 bytes.
  writeRandomCheckpoint(
    modelDir,
    parseModelConfig(TINY_BYTE_MODEL_CONFIG),
    { seed: 1 },
  );
  const c = capture();
  expect(await main(['sft-data', '--model', modelDir, '--out', sftData, '--split', 'train', '--episodes', '2'], c.io), c.stderr()).toBe(0);
}, 120_000);
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

// A context just over the system turn: each episode ends after a turn or two (its last turn runs out of context).
const modelArgs = ['--model', modelDir, '--max-new-tokens', '4', '--context-tokens', '1400'];
const sftArgs = ['--model', modelDir, '--data', sftData, '--steps', '1', '--batch-size', '2', '--full', '--out', join(scratch, 'sft-out')];
const trainArgs = ['--policy', 'model', ...modelArgs, '--episodes', '4', '--group-size', '2', '--groups-per-batch', '1', '--concurrency', '2', '--run-dir', join(scratch, 'train-run'), '--progress', 'off', '--json'];

describe('every model session of a command gets its provider and threads', () => {
  it('the machine\'s cores by default (model logits); --threads and SQLENV_THREADS override them (model generate)', async () => {
    const byDefault = capture();
    expect(await main(['model', 'logits', '--model', modelDir, '--tokens', '1,2,3'], byDefault.io), byDefault.stderr()).toBe(0);
    expectSessions(byDefault, ['logits'], cores);
    const byFlag = capture({ SQLENV_THREADS: String(cores) });
    expect(await main(['model', 'generate', '--model', modelDir, '--prompt', 'hi', '--max-new-tokens', '2', '--threads', String(ASKED)], byFlag.io), byFlag.stderr()).toBe(0);
    expectSessions(byFlag, ['generate'], ASKED); // the flag wins over the variable
    const byEnv = capture({ SQLENV_THREADS: String(ASKED) });
    expect(await main(['model', 'generate', '--model', modelDir, '--prompt', 'hi', '--max-new-tokens', '2'], byEnv.io), byEnv.stderr()).toBe(0);
    expectSessions(byEnv, ['generate'], ASKED);
  });

  it('eval and play --policy model: the inference engine', async () => {
    const evaluation = capture({ SQLENV_THREADS: String(ASKED) });
    expect(await main(['eval', '--policy', 'model', ...modelArgs, '--episodes', '1', '--json'], evaluation.io), evaluation.stderr()).toBe(0);
    expectSessions(evaluation, ['engine'], ASKED);
    const play = capture();
    expect(await main(['play', '--policy', 'model', ...modelArgs, '--json', '--threads', String(ASKED)], play.io), play.stderr()).toBe(0);
    expectSessions(play, ['engine'], ASKED);
    // A small model keeps ONNX Runtime's weight pre-packing (decided by its size), and the session got that entry.
    for (const r of [...sessions(evaluation), ...sessions(play)]) {
      expect(r['sessionConfig']).toEqual({ 'session.disable_prepacking': '0' });
      expect(r['prepacking']).toMatchObject({ prepacking: true, decidedBy: 'size' });
    }
  }, 180_000);

  it('the inference engine\'s disablePrepacking reaches its session and the `session created` record', async () => {
    for (const disablePrepacking of [true, false]) {
      const c = capture();
      const engine = await InferenceEngine.start({ modelDir, experimental: { disablePrepacking } }, c.io.logger as Logger);
      await engine.close();
      const [record] = sessions(c);
      expect(record?.['sessionConfig']).toEqual({ 'session.disable_prepacking': disablePrepacking ? '1' : '0' });
      expect(record?.['prepacking']).toMatchObject({ prepacking: !disablePrepacking, decidedBy: 'option' });
    }
  });

  it('--cpu-arena off / SQLENV_CPU_ARENA=off reaches the sessions (engine, SFT); on by default', async () => {
    const engineOff = capture({ SQLENV_THREADS: String(ASKED) });
    expect(await main(['eval', '--policy', 'model', ...modelArgs, '--episodes', '1', '--json', '--cpu-arena', 'off'], engineOff.io), engineOff.stderr()).toBe(0);
    const sftOff = capture({ SQLENV_THREADS: String(ASKED), SQLENV_CPU_ARENA: 'off' });
    expect(await main(['sft', ...sftArgs.slice(0, -1), join(scratch, 'sft-out-arena')], sftOff.io), sftOff.stderr()).toBe(0);
    const byDefault = capture({ SQLENV_THREADS: String(ASKED) });
    expect(await main(['model', 'logits', '--model', modelDir, '--tokens', '1,2,3'], byDefault.io), byDefault.stderr()).toBe(0);
    expect([...sessions(engineOff), ...sessions(sftOff), ...sessions(byDefault)].map((r) => [r['role'], r['cpuMemArena']])).toEqual([
      ['engine', false],
      ['sft', false],
      ['logits', true],
    ]);
  }, 180_000);

  it('sft: the training session', async () => {
    const c = capture({ SQLENV_THREADS: String(ASKED) });
    expect(await main(['sft', ...sftArgs], c.io), c.stderr()).toBe(0);
    expectSessions(c, ['sft'], ASKED);
  });

  it('train --policy model: the engine of the worker and of the held-out evaluation, and the learner', async () => {
    const c = capture();
    expect(await main(['train', ...trainArgs, '--eval-episodes', '1', '--threads', String(ASKED)], c.io), c.stderr()).toBe(0);
    expectSessions(c, ['engine', 'engine', 'learner'], ASKED);
  }, 240_000);

  it('learn: SFT, both evaluations and GRPO', async () => {
    const c = capture();
    const args = ['learn', '--model', modelDir, '--run-dir', join(scratch, 'learn-run'), '--sft-steps', '1', '--sft-batch-size', '2', '--episodes', '4', '--group-size', '2', '--groups-per-batch', '1'];
    expect(await main([...args, '--max-new-tokens', '4', '--concurrency', '2', '--eval-questions', '1', '--eval-seeds', '1', '--threads', String(ASKED)], c.io), c.stderr()).toBe(0);
    expectSessions(c, ['sft', 'engine', 'engine', 'learner'], ASKED);
  }, 400_000);

  it('worker and trainer: the run resolver\'s engine and the run\'s learner', async () => {
    const c = capture();
    const logger = c.io.logger as Logger;
    const execution = { provider: 'cpu', deviceId: 0, intraOpThreads: ASKED, interOpThreads: 1 } as const;
    const model = modelSpecFrom({ maxNewTokens: 4 }, modelFingerprint(modelDir));
    const spec = RolloutRunSpecSchema.parse({ run_id: 'execution-settings', policy: 'model', episodes: 2, group_size: 2, groups_per_batch: 1, model });
    const runtimes = new RuntimeCache({ logger });
    try {
      const resources = await createRunResolver(runtimes, { modelDir, execution, logger })(spec);
      await resources.release?.();
      const updater = await policyUpdaterFor(spec, modelDir, logger, execution);
      await updater.close();
    } finally {
      await runtimes.close();
    }
    expectSessions(c, ['engine', 'learner'], ASKED);
  });
});

describe('a GPU provider that cannot run here: every command exits non-zero with the reason', () => {
  const commands: [string, string[]][] = [
    ['eval', ['eval', '--policy', 'model', ...modelArgs, '--episodes', '1']],
    ['eval (a baseline policy)', ['eval', '--policy', 'oracle', '--episodes', '1']],
    ['play', ['play', '--policy', 'model', ...modelArgs]],
    ['model logits', ['model', 'logits', '--model', modelDir, '--tokens', '1,2']],
    ['model generate', ['model', 'generate', '--model', modelDir, '--prompt', 'hi']],
    ['sft', ['sft', ...sftArgs]],
    ['learn', ['learn', '--model', modelDir, '--run-dir', join(scratch, 'refused-learn')]],
    ['train', ['train', ...trainArgs]],
    ['worker', ['worker', '--redis', 'redis://127.0.0.1:6379', '--key-base', 'execution-settings-refused']],
    ['trainer', ['trainer', '--redis', 'redis://127.0.0.1:6379', '--key-base', 'execution-settings-refused', '--run', 'none']],
  ];
  const reasons = {
    webgpu: /execution provider 'webgpu' could not be loaded: .*(adapter|Vulkan)/,
    cuda: /execution provider 'cuda' could not be loaded: .*CUDA 12 and cuDNN 9/,
  };
  it.each(commands)('%s, asked by SQLENV_EXECUTION_PROVIDER=webgpu and by --execution-provider cuda', async (_, argv) => {
    const byEnv = capture({ SQLENV_EXECUTION_PROVIDER: 'webgpu' });
    expect(await main(argv, byEnv.io)).toBe(1);
    expect(byEnv.stderr()).toMatch(reasons.webgpu);
    const byFlag = capture();
    expect(await main([...argv, '--execution-provider', 'cuda'], byFlag.io)).toBe(1);
    expect(byFlag.stderr()).toMatch(reasons.cuda);
    // Refused before any model session existed: nothing ran on the CPU instead.
    expect([...sessions(byEnv), ...sessions(byFlag)]).toEqual([]);
  });

  it('an unknown provider or thread count is a usage error naming the option', async () => {
    const c = capture({ SQLENV_EXECUTION_PROVIDER: 'tpu' });
    expect(await main(['model', 'logits', '--model', modelDir, '--tokens', '1'], c.io)).toBe(2);
    expect(c.stderr()).toMatch(/executionProvider.*cpu.*cuda.*webgpu/s);
    const threads = capture();
    expect(await main(['sft', ...sftArgs, '--threads', '0'], threads.io)).toBe(2);
    expect(threads.stderr()).toMatch(/threads/);
    const arena = capture({ SQLENV_CPU_ARENA: 'maybe' });
    expect(await main(['model', 'logits', '--model', modelDir, '--tokens', '1'], arena.io)).toBe(2);
    expect(arena.stderr()).toMatch(/cpuArena.*on.*off/s);
  });
});
