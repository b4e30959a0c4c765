import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadModel, modelInit, presetConfig } from '@sqlenv/model';
import { runSftJob } from '@sqlenv/grpo';
import { SftOptionsSchema, sftJobOptions, type SftOptions } from './sft.ts';

/** `sqlenv sft` in process: checkpoints, --resume and the held-out loss, on a tiny random model. */
const root = mkdtempSync(join(tmpdir(), 'sft-resume-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const modelDir = join(root, 'model');
const data = join(root, 'train.jsonl');
const heldOut = join(root, 'dev.jsonl');

/** Lines of ids below the byte tokenizer's 256 with a loss on their second half, from a fixed LCG. */
function lines(count: number, salt: number): string {
  let x = salt;
  const next = (): number => (x = (x * 1_103_515_245 + 12_345) % 2_147_483_648) % 250;
  return Array.from({ length: count }, (_, i) => {
    const length = 6 + (i % 5);
    const ids = Array.from({ length }, next);
    return JSON.stringify({ input_ids: ids, loss_mask: ids.map((_, t) => (t >= length / 2 ? 1 : 0)) });
  }).join('\n');
}

beforeAll(async () => {
  await modelInit({ config: JSON.stringify({ ...presetConfig('tiny-qwen3'), numLayers: 1, hiddenSize: 32, intermediateSize: 48 }), out: modelDir, seed: 3 });
  writeFileSync(data, `${lines(7, 1)}\n`);
  writeFileSync(heldOut, `${lines(3, 2)}\n`);
});

interface Printed {
  steps: Array<{ step: number; loss: number; lr: number; grad_norm: number; lines: number[]; ms: number }>;
  evals: Array<{ eval_step: number; eval_loss: number }>;
  checkpoints: number[];
}

async function sft(args: Partial<SftOptions> & { out: string }, stopAfterStep?: number): Promise<Printed & { error?: unknown }> {
  let text = '';
  const stdout = new Writable({
    write(chunk: Buffer, _encoding, done) {
      text += chunk.toString();
      done();
    },
  });
  const controller = new AbortController();
  const options = SftOptionsSchema.parse({ model: modelDir, data, steps: 6, batchSize: 3, shuffle: true, seed: 5, learningRate: 0.01, schedule: 'cosine', warmupSteps: 2, ...args });
  let error: unknown;
  try {
    await runSftJob(sftJobOptions(options), { stdout }, { signal: controller.signal, onStep: (r) => (r.step === stopAfterStep ? controller.abort() : undefined) });
  } catch (caught) {
    error = caught;
  }
  const parsed = text.split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as Record<string, unknown>);
  return {
    steps: parsed.filter((l) => l.step !== undefined && l.checkpoint === undefined) as Printed['steps'],
    evals: parsed.filter((l) => l.eval_step !== undefined) as Printed['evals'],
    checkpoints: parsed.filter((l) => l.checkpoint !== undefined).map((l) => l.step as number),
    error,
  };
}

describe('sqlenv sft --checkpoint-every / --resume', () => {
  it.each([
    ['full-parameter', { full: true }, 'model.safetensors'],
    ['LoRA', { loraRank: 2, loraAlpha: 4 }, 'adapter_model.safetensors'],
  ] as const)('a %s run stopped after step 3 and resumed from its step-2 checkpoint takes the same steps, losses and final weights as one never stopped', async (name, mode, file) => {
    const whole = await sft({ ...mode, out: join(root, `${name}-whole`), checkpointEvery: 2 });
    expect(whole.error).toBeUndefined();
    expect(whole.steps.map((s) => s.step)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(whole.checkpoints).toEqual([2, 4, 6]);

    const out = join(root, `${name}-stopped`);
    const stopped = await sft({ ...mode, out, checkpointEvery: 2 }, 3);
    expect(stopped.error).toMatchObject({ code: 'ABORTED' });
    expect(stopped.checkpoints).toEqual([2]);
    // The checkpoint holds a loadable model or adapter directory, to evaluate while the run goes on.
    expect(existsSync(join(out, 'checkpoint', 'model', file))).toBe(true);

    const resumed = await sft({ ...mode, out, checkpointEvery: 2, resume: true });
    expect(resumed.error).toBeUndefined();
    expect(resumed.steps.map((s) => s.step)).toEqual([3, 4, 5, 6]);
    // Everything a step prints but its wall time: loss, learning rate, gradient norm, the batch's lines.
    const exact = (steps: Printed['steps']): unknown[] => steps.map(({ ms: _ms, ...rest }) => rest);
    expect(exact(resumed.steps)).toEqual(exact(whole.steps.slice(2)));
    expect(readFileSync(join(out, file))).toEqual(readFileSync(join(root, `${name}-whole`, file)));
  }, 300_000);

  it('refuses to resume a run with other batches, or with no checkpoint, naming what differs; extends a constant-rate run', async () => {
    const out = join(root, 'refused');
    await sft({ full: true, out, steps: 2, checkpointEvery: 1 });
    const other = await sft({ full: true, out, steps: 4, batchSize: 2, checkpointEvery: 1, resume: true });
    expect(other.error).toMatchObject({ code: 'VALIDATION', message: expect.stringContaining('written by another run (') });
    expect((other.error as Error).message).toContain('steps: checkpoint 2, now 4; batch_size: checkpoint 3, now 2)');
    expect(other.steps).toEqual([]);
    // A constant learning rate does not depend on the total, so such a run may be continued further.
    const constant = join(root, 'constant');
    await sft({ full: true, out: constant, steps: 2, schedule: 'constant', warmupSteps: 0, checkpointEvery: 1 });
    expect((await sft({ full: true, out: constant, steps: 3, schedule: 'constant', warmupSteps: 0, checkpointEvery: 1, resume: true })).steps.map((s) => s.step)).toEqual([3]);
    const none = await sft({ full: true, out: join(root, 'never-checkpointed'), resume: true });
    expect(none.error).toMatchObject({ code: 'VALIDATION', message: expect.stringContaining('--resume: no checkpoint at') });
  }, 300_000);
});

describe('sqlenv sft --eval-data', () => {
  it('prints the held-out loss before the first step, every --eval-every steps and after the last; it is the loss a step would report, without training', async () => {
    const run = await sft({ full: true, out: join(root, 'eval'), evalData: heldOut, evalEvery: 4 });
    expect(run.evals.map((e) => e.eval_step)).toEqual([0, 4, 6]);
    expect(run.evals.every((e) => Number.isFinite(e.eval_loss) && e.eval_loss > 0)).toBe(true);
    // Training on the held-out file itself, one batch of all its lines in file order: the step-0
    // held-out loss is step 1's batch loss (measured before the update), and evaluation moved nothing.
    const same = await sft({ full: true, out: join(root, 'eval-same'), data: heldOut, evalData: heldOut, shuffle: false, batchSize: 3, steps: 1 });
    expect(same.evals[0]?.eval_step).toBe(0);
    expect(same.evals[0]?.eval_loss).toBeCloseTo(same.steps[0]?.loss as number, 6);
    expect(loadModel(join(root, 'eval-same')).weights.size).toBeGreaterThan(0);
    expect((await sft({ full: true, out: join(root, 'eval-bad'), evalEvery: 2 })).error).toMatchObject({ code: 'VALIDATION', message: '--eval-every needs --eval-data' });
  }, 300_000);
});
