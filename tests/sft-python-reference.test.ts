import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { initLoraWeights, LORA_TARGETS, parseLoraConfig, readModelConfig, saveAdapterDir } from '@sqlenv/model';
import { Xoshiro128 } from '@sqlenv/shared';

/**
 * `sqlenv sft` against PyTorch + transformers + PEFT (tests/python/sft_reference_check.py), run
 * when SQLENV_PYTHON names a Python with torch, transformers, peft and safetensors (.ci/run builds
 * one from the local package mirror); skipped with a message otherwise.
 *
 * Both sides start from the same random Qwen3 checkpoint (`sqlenv model init`) and the same PEFT
 * adapter (B ≠ 0, so every factor gets a gradient, on all seven target modules), and take plain SGD
 * steps (`--optimizer sgd`: p ← p − lr·grad) on ragged input_ids/loss_mask lines: the step losses
 * and every LoRA tensor afterwards must agree, and the trained adapter loaded by
 * PeftModel.from_pretrained must give our `model logits --adapter` logits.
 */
const PYTHON = process.env['SQLENV_PYTHON'];
const MODULES = 'import torch, transformers, peft, safetensors';
const probe = PYTHON === undefined ? null : spawnSync(PYTHON, ['-c', MODULES], { encoding: 'utf8' });
const skipReason =
  PYTHON === undefined
    ? 'SQLENV_PYTHON is not set (point it at a Python with torch, transformers, peft and safetensors, e.g. the .cache/pyref venv .ci/run builds)'
    : probe?.status !== 0
      ? `${PYTHON} cannot ${MODULES}: ${(probe?.stderr ?? '').trim().split('\n').at(-1) ?? ''}`
      : null;

const bin = fileURLToPath(new URL('../apps/cli/bin/sqlenv.js', import.meta.url));
const script = fileURLToPath(new URL('./python/sft_reference_check.py', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'sft-reference-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function sqlenv(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [bin, ...args], { timeout: 120_000, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error !== null) reject(new Error(`sqlenv ${args.join(' ')} failed: ${stderr}`));
      else resolve(stdout);
    });
  });
}

interface RunCheck {
  steps: number;
  reference_losses: number[];
  tensors: number;
  max_tensor_rel: number;
  max_tensor_abs: number;
  max_update_rel: number;
  worst_update: string;
  min_update_norm: number;
}
interface LogitsCheck {
  max_abs: number;
  max_rel: number;
  adapter_effect_max_abs: number;
}

describe('sqlenv sft matches PyTorch + transformers + PEFT', () => {
  if (skipReason !== null) {
    it.skip(`Python reference check skipped: ${skipReason}`, () => undefined);
    return;
  }

  it('SGD steps: same step losses, same LoRA tensors; the trained adapter gives the same logits in PEFT', async () => {
    const model = join(root, 'model');
    await sqlenv(['model', 'init', '--config', 'tiny-qwen3', '--out', model, '--seed', '7', '--dtype', 'F32']);
    const config = readModelConfig(model);
    const lora = parseLoraConfig({ rank: 4, alpha: 12, targets: [...LORA_TARGETS] });
    const init = join(root, 'init');
    saveAdapterDir(init, config, { lora, weights: initLoraWeights(config, lora, { seed: 5, bStd: 0.1 }) });

    // Five ragged lines with scattered targets; batches of 3 wrap: step 1 takes lines 0-2, step 2 lines 3, 4, 0.
    const rng = new Xoshiro128(11);
    const lines = [9, 23, 6, 17, 12].map((n) => {
      const ids = Array.from({ length: n }, () => Math.floor(rng.uniform() * config.vocabSize));
      const mask = ids.map((_, i) => (i > 0 && (i === n - 1 || rng.uniform() < 0.6) ? 1 : 0));
      return { input_ids: ids, loss_mask: mask };
    });
    const data = join(root, 'data.jsonl');
    writeFileSync(data, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');

    const lr = 0.5;
    const common = ['sft', '--model', model, '--adapter-init', init, '--data', data, '--optimizer', 'sgd', '--lr', String(lr), '--batch-size', '3'];
    const runs = [
      { steps: 1, out: join(root, 'one-step'), extra: [] },
      // A small token budget splits each batch into micro-batches whose gradients must add up.
      { steps: 2, out: join(root, 'two-steps'), extra: ['--micro-batch-tokens', '24'] },
    ];
    const ourLosses: number[][] = [];
    for (const run of runs) {
      const stdout = await sqlenv([...common, '--steps', String(run.steps), '--out', run.out, ...run.extra]);
      const records = stdout.trim().split('\n').map((l) => JSON.parse(l) as { step?: number; loss?: number; micro_batches?: number; done?: boolean });
      ourLosses.push(records.filter((r) => r.step !== undefined).map((r) => r.loss as number));
      expect(records.at(-1)?.done).toBe(true);
      if (run.extra.length > 0) expect(records[0]?.micro_batches).toBeGreaterThan(1);
    }

    const probes = [lines[1]!.input_ids, [256, 10, 200, 33, 7, 120, 65]];
    const logits = [];
    for (const tokens of probes) {
      const ours = JSON.parse(await sqlenv(['model', 'logits', '--model', model, '--adapter', runs[1]!.out, '--tokens', tokens.join(','), '--json'])) as number[];
      logits.push({ adapter: runs[1]!.out, tokens, ours });
    }

    const args = { model, init, data, lr, batch_size: 3, runs: runs.map(({ steps, out }) => ({ steps, out })), logits };
    const result = spawnSync(PYTHON as string, [script, JSON.stringify(args)], { encoding: 'utf8', timeout: 300_000, maxBuffer: 64 * 1024 * 1024 });
    expect(result.status, result.stderr).toBe(0);
    const report = JSON.parse(result.stdout) as { model_class: string; runs: RunCheck[]; logits: LogitsCheck[] };
    console.info(`sft reference check: ${JSON.stringify({ ours: ourLosses, ...report })}`);

    expect(report.model_class).toBe('Qwen3ForCausalLM');
    report.runs.forEach((check, r) => {
      expect(check.tensors).toBe(2 * config.numLayers * LORA_TARGETS.length);
      check.reference_losses.forEach((ref, k) => expect(Math.abs((ourLosses[r]![k]! - ref) / ref)).toBeLessThanOrEqual(1e-5));
      expect(check.max_tensor_rel).toBeLessThanOrEqual(1e-5);
      expect(check.max_tensor_abs).toBeLessThanOrEqual(1e-5);
      // Every factor moved, and the move itself (lr × the summed gradients) agrees closely.
      expect(check.min_update_norm).toBeGreaterThan(1e-4);
      expect(check.max_update_rel, check.worst_update).toBeLessThanOrEqual(1e-3);
    });
    for (const check of report.logits) {
      expect(check.adapter_effect_max_abs).toBeGreaterThan(1e-2);
      expect(check.max_abs).toBeLessThanOrEqual(1e-4);
    }
  }, 600_000);
});
