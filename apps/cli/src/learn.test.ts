import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseModelConfig, writeRandomCheckpoint } from '@sqlenv/model';
import { TINY_BYTE_MODEL_CONFIG } from '@sqlenv/model/testing';
import { readRunMetrics, readSavedEvals } from '@sqlenv/runs';
import { DEFAULT_LEARN_MODEL } from './commands/learn.ts';

/**
 * `sqlenv learn` (what `npm start` runs) end to end, shortened: SFT steps, both held-out
 * evaluations, GRPO updates, the report and the final JSON line. The main case starts from the
 * shipped checkpoint, whose sampled episodes differ in reward, so GRPO has groups to learn from and
 * must have updated the policy; the others use a random tiny model. Whether a real run improves is
 * the README's measured figure (a 15-minute run), not a unit test's.
 */
const bin = fileURLToPath(new URL('../bin/sqlenv.js', import.meta.url));
const scratch = mkdtempSync(path.join(os.tmpdir(), 'sqlenv-learn-'));
const modelDir = path.join(scratch, 'model');
const runDir = path.join(scratch, 'run');

function run(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [bin, ...args], { env: { ...process.env, SQLENV_CACHE_DIR: path.join(scratch, 'cache') }, timeout: 400_000, maxBuffer: 64 << 20 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout, stderr });
    });
  });
}

beforeAll(() => {
  // The byte tokenizer needs a long context: an oracle episode is ~2,500 bytes.
  writeRandomCheckpoint(
    modelDir,
    parseModelConfig(TINY_BYTE_MODEL_CONFIG),
    { seed: 1 },
  );
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('sqlenv learn', () => {
  it('runs SFT, the two evaluations and GRPO updates, writes the run directory and prints one JSON line last', async () => {
    const { code, stdout, stderr } = await run([
      'learn', '--model', DEFAULT_LEARN_MODEL, '--run-dir', runDir, '--sft-steps', '3', '--sft-batch-size', '2',
      '--episodes', '8', '--group-size', '4', '--groups-per-batch', '2', '--max-new-tokens', '64', '--concurrency', '8',
      '--eval-questions', '3', '--eval-seeds', '2', '--temperature', '1.5', '--lr', '0.001',
      '--advantage', 'dr_grpo', '--negative-weight', '0.5', '--reward', '{"answerSimilarityScale":0.3}', '--tis-cap', '3',
    ]);
    expect(code, stderr).toBe(0);
    // The GRPO settings reach the run's spec.
    expect(JSON.parse(readFileSync(path.join(runDir, 'run.json'), 'utf8'))).toMatchObject({ advantage: 'dr_grpo', negative_advantage_weight: 0.5, reward: { answerSimilarityScale: 0.3 }, model: { learner: { loss: { importanceCap: 3 } } } });
    const result = JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as Record<string, unknown>;
    expect(Object.keys(result)).toEqual(expect.arrayContaining(['success_before', 'success_after', 'ci95_before', 'ci95_after', 'sft_success', 'minutes', 'report', 'diff', 'diff_ci95', 'improved']));
    // The paired test: diff is after − before over the same episodes, inside its interval; improved iff the interval is above 0.
    const [diffLow, diffHigh] = result['diff_ci95'] as [number, number];
    expect(result['diff']).toBeCloseTo((result['success_after'] as number) - (result['success_before'] as number), 3);
    expect(diffLow).toBeLessThanOrEqual(result['diff'] as number);
    expect(diffHigh).toBeGreaterThanOrEqual(result['diff'] as number);
    expect(result['improved']).toBe(diffLow > 0);
    // Two seeds per question: pass@1 is the success rate, pass@4 and pass@8 have no estimate.
    expect(result['pass_at_k_before']).toEqual({ '1': result['success_before'], '4': null, '8': null });
    expect(result['pass_at_k_after']).toEqual({ '1': result['success_after'], '4': null, '8': null });
    expect(stderr).toMatch(/^ {2}paired {4}after − before [+−]\d+\.\d points \(95 % CI [+−]\d+\.\d … [+−]\d+\.\d, bootstrap over 3 questions, 6 episode pairs\): (not )?improved$/m);
    expect(stderr).toMatch(/eval after +v\d+: .*pass@1\/4\/8 \d+\.\d\/—\/— %/);
    for (const [rate, ci] of [['success_before', 'ci95_before'], ['success_after', 'ci95_after']] as const) {
      const [low, high] = result[ci] as [number, number];
      expect(low).toBeLessThanOrEqual(result[rate] as number);
      expect(high).toBeGreaterThanOrEqual(result[rate] as number);
    }
    expect(result['episodes_per_eval']).toBe(6);
    expect(result['report']).toBe(path.join(runDir, 'report.html'));
    expect(existsSync(path.join(runDir, 'report.html'))).toBe(true);
    // Phase by phase: SFT steps logged and a full model written, evaluations before/after, GRPO versions.
    const steps = readFileSync(path.join(runDir, 'sft', 'steps.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { step?: number });
    expect(steps.filter((s) => s.step !== undefined).map((s) => s.step)).toEqual([1, 2, 3]);
    expect(existsSync(path.join(runDir, 'sft', 'model', 'model.safetensors'))).toBe(true);
    const evals = readSavedEvals(runDir);
    expect(evals.map((e) => [e.name, e.episodes_count]).sort()).toEqual([['after', 6], ['before', 0 + 6]]);
    // Each evaluation keeps how often the policy had the gold rows, and the train output prints it.
    for (const e of evals) expect(e.gold_rows_rate).toBeGreaterThanOrEqual(0);
    expect(stderr + stdout).toMatch(/eval before +v0: success .*, gold rows \d+\.\d %/);
    // The same questions and seeds before and after (paired), two seeds per question.
    const keys = (name: string): string[] => (evals.find((e) => e.name === name)?.episodes ?? []).map((ep) => `${ep.question_id}#${ep.seed}`);
    expect(keys('after')).toEqual(keys('before'));
    expect(new Set((evals[0]?.episodes ?? []).map((ep) => ep.question_id)).size).toBe(3);
    // GRPO played its 8 episodes and updated the policy: at least one version with the learner's numbers and
    // its adapter, and the 'after' evaluation ran that version.
    expect(stderr).toContain('8 completed, 0 failed, 8 consumed by the trainer (0 lost, 0 duplicated)');
    const versions = readRunMetrics(runDir);
    expect(versions.length).toBeGreaterThanOrEqual(1);
    for (const v of versions) {
      expect(v.loss).not.toBeNull();
      expect(Number.isFinite(v.grad_norm)).toBe(true);
      // The sampler-vs-learner mismatch is recorded per version, with the cap the run was given.
      expect(v.extra['tis_cap']).toBe(3);
      expect(v.extra['mismatch_k3']).toBeGreaterThanOrEqual(0);
    }
    // Version 1 trains on episodes sampled by version 0, the weights the learner starts from: all fresh,
    // and the engine and the learner agree up to float rounding.
    expect(versions[0]?.extra).toMatchObject({ fresh_token_fraction: 1, truncated_fraction: 0 });
    expect(versions[0]?.extra['mismatch_fresh_abs_logprob']).toBeLessThan(1e-3);
    const last = versions.at(-1)?.version ?? 0;
    expect(stderr).toMatch(new RegExp(`policy {4}version ${last} after ${last} batches`));
    expect(evals.find((e) => e.name === 'after')?.version).toBe(last);
    expect(existsSync(path.join(runDir, 'adapters', `v${last}`))).toBe(true);
    expect(stderr).toContain('SFT data:');
    // Not a terminal: every phase reports its progress as lines (a tenth at a time), with ETA.
    expect(stderr).toMatch(/^SFT \[█+\] 3\/3 steps .*ETA 0s$/m);
    expect(stderr).toMatch(/^Evaluation before \(v0, dev\) \[.*\] 6\/6 .*ETA 0s$/m);
    expect(stderr).toMatch(/^Evaluation after \(v\d+, dev\) \[.*\] 6\/6 .*ETA 0s$/m);
    expect(stderr).toMatch(/^\[█+\] 8\/8 ep · v[1-9]\d* .*ETA 0s$/m);
    expect(stderr).toContain('GRPO: sqlenv train');
  }, 420_000);

  it('--sft-mode lora: SFT writes a PEFT adapter and GRPO continues it (the Hugging Face checkpoint path)', async () => {
    const loraRun = path.join(scratch, 'run-lora');
    const { code, stdout, stderr } = await run([
      'learn', '--model', modelDir, '--run-dir', loraRun, '--sft-mode', 'lora', '--lora-rank', '4', '--sft-steps', '2', '--sft-batch-size', '2',
      '--episodes', '4', '--group-size', '4', '--groups-per-batch', '1', '--max-new-tokens', '8', '--concurrency', '4', '--eval-questions', '2', '--eval-seeds', '1',
    ]);
    expect(code, stderr).toBe(0);
    expect(JSON.parse(stdout.trim().split('\n').at(-1) ?? '')).toMatchObject({ episodes_per_eval: 2 });
    const adapterConfig = JSON.parse(readFileSync(path.join(loraRun, 'sft', 'adapter', 'adapter_config.json'), 'utf8')) as { r: number; lora_alpha: number };
    expect(adapterConfig).toMatchObject({ r: 4, lora_alpha: 8 });
    expect(existsSync(path.join(loraRun, 'sft', 'model'))).toBe(false);
    expect(stderr).toContain(`--model ${modelDir} --adapter ${path.join(loraRun, 'sft', 'adapter')}`);
    expect(JSON.parse(readFileSync(path.join(loraRun, 'run.json'), 'utf8'))).toMatchObject({ model: { adapter: path.join(loraRun, 'sft', 'adapter') } });
  }, 420_000);

  it('refuses a model directory without config.json', async () => {
    const { code, stderr } = await run(['learn', '--model', path.join(scratch, 'nowhere')]);
    expect(code).toBe(2);
    expect(stderr).toContain('no config.json');
  });

  it('refuses malformed flags with the reason, before writing anything', async () => {
    for (const [flag, value, reason] of [['--sft-mode', 'half', 'sft-mode'], ['--eval-seeds', '0', 'eval-seeds'], ['--temperature', '-1', 'temperature'], ['--negative-weight', '2', 'negative-weight'], ['--learner', '{"epochs":0}', 'epochs'], ['--learner', 'not json', '--learner'], ['--reward', '{"noSuchSetting":1}', 'noSuchSetting'], ['--episodes', '12', 'group'], ['--tis-cap', 'Infinity', 'tis-cap']] as const) {
      const out = path.join(scratch, `bad-${flag.slice(2)}`);
      const { code, stderr } = await run(['learn', '--model', modelDir, '--run-dir', out, flag, value]);
      expect(code, stderr).toBe(2);
      expect(stderr).toContain(reason);
      expect(existsSync(out)).toBe(false);
    }
  });
});
