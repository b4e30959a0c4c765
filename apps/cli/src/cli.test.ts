import { execFile } from 'node:child_process';
import { mkdtemp, mkdir, readFile, writeFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEnvServer } from '@sqlenv/env-server';
import { createSqlEnvRuntime } from '@sqlenv/sql-env';

/** These tests run the real `sqlenv` bin as a child process, as a user would. */
const bin = fileURLToPath(new URL('../bin/sqlenv.js', import.meta.url));
let cacheDir: string;
let scratch: string;

function run(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [bin, ...args], { env: { ...process.env, SQLENV_CACHE_DIR: cacheDir }, timeout: 120_000 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : 1;
      resolve({ code, stdout, stderr });
    });
  });
}

beforeAll(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'sqlenv-cli-'));
  cacheDir = path.join(scratch, 'cache');
});
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

describe('sqlenv CLI', () => {
  it('eval --json prints one summary object as its last line', async () => {
    const { code, stdout } = await run(['eval', '--policy', 'oracle', '--episodes', '12', '--seed', '3', '--json']);
    expect(code).toBe(0);
    const last = stdout.trim().split('\n').at(-1) ?? '';
    const summary = JSON.parse(last) as Record<string, number>;
    expect(summary['episodes']).toBe(12);
    expect(summary['success_rate']).toBe(1);
    // Evaluation mode by default: the policy saw (and the report sums) the terminal reward only.
    expect(summary['mean_reward']).toBe(1);
    expect(summary['reward_mode']).toBe('eval');
    // The oracle submits the gold answer exactly: right under precision-aware float matching too.
    expect(summary['success_rate_precision']).toBe(1);
    // The oracle's last query is the gold SQL: every episode ends with the gold rows, all answered right.
    expect(summary['gold_rows_rate']).toBe(1);
    expect(summary['answer_given_gold_rows']).toBe(1);
    expect(summary['errors']).toBe(0);
    expect(summary).toHaveProperty('mean_steps');
  });

  it('eval --seeds K plays every question K times with its own seed, so pass@k is computable, and saves it', async () => {
    const runDir = path.join(scratch, 'seeds-run');
    const { code, stdout, stderr } = await run(['eval', '--policy', 'oracle', '--split', 'dev', '--episodes', '3', '--seeds', '8', '--seed', '2', '--json', '--save-eval', runDir, '--eval-name', 'oracle']);
    expect(code, stderr).toBe(0);
    const summary = JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as Record<string, unknown>;
    expect(summary).toMatchObject({ episodes: 24, questions: 3, pass_at_k: { '1': 1, '4': 1, '8': 1 } });
    const saved = JSON.parse(await readFile(path.join(runDir, 'evals', 'oracle.json'), 'utf8')) as { pass_at_k: unknown; episodes: Array<{ question_id: string; seed: number }> };
    expect(saved.pass_at_k).toEqual({ '1': 1, '4': 1, '8': 1 });
    // Three questions, each at eight different seeds (episode i resets with 2 + i).
    expect(new Set(saved.episodes.map((ep) => ep.question_id)).size).toBe(3);
    expect(saved.episodes.map((ep) => ep.seed)).toEqual(Array.from({ length: 24 }, (_, i) => 2 + i));
    // One sample per question (the default): pass@4 and pass@8 have no estimate, and the report says why.
    const single = await run(['eval', '--policy', 'oracle', '--split', 'dev', '--episodes', '3']);
    expect(single.stdout).toMatch(/^ {2}pass@k {9}pass@1 100\.0 %, pass@4 —, pass@8 — \(3 questions × 1 samples; — : some question has fewer than k, see --seeds\)$/m);
  });

  it('eval prints both success rates in its report: the environment\'s and with precise floats', async () => {
    const { code, stdout } = await run(['eval', '--policy', 'oracle', '--episodes', '4', '--seed', '5']);
    expect(code).toBe(0);
    expect(stdout).toMatch(/^ {2}success rate {3}100\.0 %$/m);
    expect(stdout).toMatch(/^ {2}success \(precise floats\) 100\.0 %$/m);
    expect(stdout).toMatch(/^ {2}mean reward {4}\d/m);
  });

  it('random policy almost never succeeds', async () => {
    const { code, stdout } = await run(['eval', '--policy', 'random', '--episodes', '30', '--mode', 'train', '--json']);
    expect(code).toBe(0);
    const summary = JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as Record<string, number | string>;
    expect(summary['success_rate']).toBeLessThan(0.1);
    // --mode train: the shaped reward (step costs and penalties), which the terminal reward alone never is.
    expect(summary['reward_mode']).toBe('train');
    expect(summary['mean_reward']).not.toBe(summary['success_rate']);
  });

  it('bad arguments give a one-line error and exit code 2', async () => {
    for (const args of [['eval', '--policy', 'genius'], ['eval', '--episodes', '-3'], ['eval', '--nope'], ['frobnicate'], ['play', '--split', 'test']]) {
      const { code, stderr } = await run(args);
      expect(code, args.join(' ')).toBe(2);
      expect(stderr.trim().split('\n')).toHaveLength(1);
    }
  });

  it('--deterministic is refused with --inference-url (the servers batch as requests arrive), before anything starts', async () => {
    const { code, stderr } = await run(['eval', '--policy', 'model', '--model', 'no-such-model', '--deterministic', '--inference-url', 'http://127.0.0.1:9']);
    expect(code).toBe(2);
    expect(stderr).toContain('--deterministic needs the in-process engine');
    expect(stderr.trim().split('\n')).toHaveLength(1);
    const both = await run(['eval', '--deterministic', '--no-deterministic']);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('give one of the two');
  });

  it('a missing dataset directory gives a clear message naming it', async () => {
    const missing = path.join(scratch, 'no-such-dataset');
    const { code, stderr } = await run(['eval', '--dataset', missing, '--episodes', '1']);
    expect(code).not.toBe(0);
    expect(stderr).toContain('no-such-dataset');
    expect(stderr.trim().split('\n')).toHaveLength(1);
  });

  it('eval --save-eval writes evals/<name>.json with transcripts, and report builds report.html from them', async () => {
    const runDir = path.join(scratch, 'run-dir');
    const before = await run(['eval', '--policy', 'random', '--split', 'dev', '--episodes', '3', '--seed', '4', '--json', '--save-eval', runDir, '--eval-name', 'before']);
    expect(before.code, before.stderr).toBe(0);
    expect(before.stderr).toContain(path.join(runDir, 'evals', 'before.json'));
    const after = await run(['eval', '--policy', 'oracle', '--split', 'dev', '--episodes', '3', '--seed', '4', '--json', '--save-eval', runDir, '--eval-name', 'after', '--eval-version', '5']);
    expect(after.code, after.stderr).toBe(0);
    const saved = JSON.parse(await readFile(path.join(runDir, 'evals', 'after.json'), 'utf8')) as { version: number; split: string; seeds: number[]; episodes: Array<{ seed: number; question: string; correct: boolean; transcript: Array<{ action: { action_type: string } | null; result: string }> }> };
    expect(saved).toMatchObject({ version: 5, split: 'dev', seeds: [4] });
    expect(saved.episodes.map((e) => e.seed)).toEqual([4, 5, 6]);
    expect(saved.episodes.every((e) => e.correct && e.question.length > 0 && e.transcript.at(-1)?.action?.action_type === 'ANSWER')).toBe(true);
    const report = await run(['report', runDir]);
    expect(report.code, report.stderr).toBe(0);
    expect(report.stdout).toContain('(0 versions, 2 evaluations)');
    const html = await readFile(path.join(runDir, 'report.html'), 'utf8');
    expect(html).toContain('gained 3');
    expect((await run(['eval', '--episodes', '1', '--save-eval', runDir])).code).toBe(2);
    expect((await run(['report', path.join(scratch, 'nothing-here')])).code).toBe(1);
  });

  it('play --actions FILE --json prints one step result per line', async () => {
    const actions = path.join(scratch, 'actions.jsonl');
    await writeFile(
      actions,
      [
        JSON.stringify({ action_type: 'DESCRIBE', argument: 'customers' }),
        JSON.stringify({ action_type: 'QUERY', argument: 'SELECT COUNT(*) FROM customers' }),
        JSON.stringify({ action_type: 'DESCRIBE', argument: 'no_such_table' }),
        JSON.stringify({ action_type: 'ANSWER', argument: '42' }),
      ].join('\n'),
    );
    const { code, stdout } = await run(['play', '--question-id', 'retail_shop_train_0', '--actions', actions, '--json']);
    expect(code).toBe(0);
    const lines = stdout.trim().split('\n').map((l) => JSON.parse(l) as { observation: { error: string; step_count: number }; reward: number | null; done: boolean });
    expect(lines).toHaveLength(5);
    expect(lines[0]?.reward).toBeNull();
    expect(lines[1]?.observation.step_count).toBe(1);
    expect(lines[3]?.observation.error).toMatch(/no_such_table.*Customers/);
    expect(lines[4]?.done).toBe(true);
  });

  it('play rejects a malformed actions file naming the line', async () => {
    const actions = path.join(scratch, 'bad.jsonl');
    await writeFile(actions, `${JSON.stringify({ action_type: 'DESCRIBE', argument: 'x' })}\n{"action_type": "DROP", "argument": "x"}\n`);
    const { code, stderr } = await run(['play', '--actions', actions, '--json']);
    expect(code).toBe(2);
    expect(stderr).toContain('bad.jsonl:2');
  });

  it('datasets check reports what is wrong with a broken directory', async () => {
    const dir = path.join(scratch, 'broken');
    await mkdir(path.join(dir, 'database', 'ghost'), { recursive: true });
    await writeFile(path.join(dir, 'train_spider.json'), JSON.stringify([{ db_id: 'ghost', question: 'How many?', query: 'SELECT 1' }]));
    const { code, stdout } = await run(['datasets', 'check', dir, '--json']);
    expect(code).toBe(1);
    const report = JSON.parse(stdout) as { ok: boolean; problems: Array<{ kind: string }> };
    expect(report.ok).toBe(false);
    expect(report.problems.map((p) => p.kind)).toContain('missing_database');
  });

  it('datasets builtin writes the built-in dataset with extra training draws; bad flags exit 2', async () => {
    const dir = path.join(scratch, 'builtin-extra');
    const { code, stdout } = await run(['datasets', 'builtin', '--out', dir, '--extra-train-per-instance', '2']);
    expect(code).toBe(0);
    const train = Number(/(\d+) train and 60 dev questions/.exec(stdout)?.[1]);
    expect(train).toBeGreaterThan(500);
    const check = await run(['datasets', 'check', dir, '--json']);
    expect((JSON.parse(check.stdout) as { ok: boolean }).ok).toBe(true);
    expect((await run(['datasets', 'builtin'])).code).toBe(2);
    expect((await run(['datasets', 'builtin', '--out', dir, '--extra-train-per-instance', 'x'])).code).toBe(2);
  });
});

describe('sqlenv model', () => {
  it('writes a random checkpoint, prints its logits as one JSON array and generates from it', async () => {
    const dir = path.join(scratch, 'tiny-model');
    const init = await run(['model', 'init', '--config', 'tiny-llama', '--out', dir, '--seed', '7']);
    expect(init.code, init.stderr).toBe(0);
    const logits = await run(['model', 'logits', '--model', dir, '--tokens', '1,2,3', '--json']);
    expect(logits.code, logits.stderr).toBe(0);
    const values = JSON.parse(logits.stdout) as number[];
    expect(values.length).toBeGreaterThan(100);
    expect(values.every((v) => Number.isFinite(v))).toBe(true);
    const again = await run(['model', 'logits', '--model', dir, '--tokens', '1,2,3', '--json']);
    expect(JSON.parse(again.stdout)).toEqual(values);
    const gen = await run(['model', 'generate', '--model', dir, '--prompt', 'hi', '--max-new-tokens', '5', '--json', '--seed', '1']);
    expect(gen.code, gen.stderr).toBe(0);
    const result = JSON.parse(gen.stdout) as { tokens: number[]; logprobs: number[] };
    expect(result.tokens.length).toBeGreaterThan(0);
    expect(result.logprobs.every((lp) => lp <= 0)).toBe(true);
    const bad = await run(['model', 'logits', '--model', dir, '--tokens', '1,x']);
    expect(bad.code).toBe(2);
    const missing = await run(['model', 'logits', '--model', path.join(scratch, 'nope'), '--tokens', '1']);
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toContain('nope');
  });

  it('a model plays: eval --policy model writes trajectories, play shows each turn, sft-data writes ids', async () => {
    const dir = path.join(scratch, 'tiny-qwen3');
    expect((await run(['model', 'init', '--config', 'tiny-qwen3', '--out', dir, '--seed', '2'])).code).toBe(0);
    const trajectories = path.join(scratch, 'traj.jsonl');
    const evaluated = await run(['eval', '--policy', 'model', '--model', dir, '--episodes', '3', '--temperature', '1', '--max-new-tokens', '16', '--trajectories', trajectories, '--json']);
    expect(evaluated.code, evaluated.stderr).toBe(0);
    const summary = JSON.parse(evaluated.stdout.trim().split('\n').at(-1) ?? '{}') as { policy: string; episodes: number; errors: number; format_error_rate: number; mean_tokens: number };
    expect(summary).toMatchObject({ policy: 'model', episodes: 3, errors: 0 });
    expect(summary.format_error_rate).toBeGreaterThan(0.5); // a random model writes no tool calls
    expect(summary.mean_tokens).toBeGreaterThan(1000);
    const { readFile } = await import('node:fs/promises');
    const { TrajectorySchema } = await import('@sqlenv/protocol');
    const lines = (await readFile(trajectories, 'utf8')).trim().split('\n');
    expect(lines).toHaveLength(3);
    // --save-eval plays in lockstep by default: the same command saves the same file but its created_at.
    const saved = async (name: string): Promise<string> => {
      const r = await run(['eval', '--policy', 'model', '--model', dir, '--episodes', '6', '--concurrency', '3', '--temperature', '1', '--max-new-tokens', '16', '--save-eval', scratch, '--eval-name', name]);
      expect(r.code, r.stderr).toBe(0);
      return (await readFile(path.join(scratch, 'evals', `${name}.json`), 'utf8')).replace(/"created_at":"[^"]*"/, '').replace(`"name":"${name}"`, '');
    };
    expect(await saved('same-b')).toBe(await saved('same-a'));
    for (const line of lines) expect(TrajectorySchema.parse(JSON.parse(line))).toMatchObject({ schema_version: 2, policy: 'model', sampling: { temperature: 1 } });

    const played = await run(['play', '--policy', 'model', '--model', dir, '--question-id', 'retail_shop_train_0', '--max-new-tokens', '8', '--context-tokens', '1400']);
    expect(played.code, played.stderr).toBe(0);
    expect(played.stdout).toContain('── episode turn 1 (policy v0)');
    expect(played.stdout).toMatch(/model wrote: [\s\S]*parse error: [\s\S]*reward: {6}-0\.100/);
    expect(played.stdout).toMatch(/Done: (context_exhausted|budget_exhausted)/);

    const sft = path.join(scratch, 'sft.jsonl');
    const data = await run(['sft-data', '--model', dir, '--out', sft, '--split', 'dev', '--episodes', '4']);
    expect(data.code, data.stderr).toBe(0);
    expect(data.stdout).toMatch(/^wrote \d+ oracle episodes/);
    const noModel = await run(['eval', '--policy', 'model', '--episodes', '1']);
    expect(noModel.code).toBe(2);
    expect(noModel.stderr).toContain('--model DIR');
  }, 300_000);
});

describe('sqlenv eval --url', () => {
  it('gives the same report against a running server (in eval mode, as `sqlenv serve` is by default) as in-process', async () => {
    const runtime = await createSqlEnvRuntime({ dataset: 'builtin', cacheDir, env: { rewardMode: 'eval' } });
    const server = createEnvServer({ runtime, defaultMetrics: false });
    try {
      const { port } = await server.listen(0, '127.0.0.1');
      const args = ['eval', '--policy', 'oracle', '--episodes', '15', '--seed', '9', '--json'];
      const [remote, local] = await Promise.all([run([...args, '--url', `ws://127.0.0.1:${port}`]), run(args)]);
      expect(remote.code, remote.stderr).toBe(0);
      expect(local.code, local.stderr).toBe(0);
      const summary = (out: string): Record<string, unknown> => JSON.parse(out.trim().split('\n').at(-1) ?? '') as Record<string, unknown>;
      const { reward_mode: remoteMode, gold_rows_rate: remoteGold, answer_given_gold_rows: remoteCopied, ...remoteReport } = summary(remote.stdout);
      const { reward_mode: localMode, gold_rows_rate: localGold, answer_given_gold_rows: localCopied, ...localReport } = summary(local.stdout);
      expect([remoteMode, localMode]).toEqual(['server', 'eval']);
      expect(remoteReport).toEqual(localReport);
      // A server in eval mode keeps the reward breakdown (Φ would tell how close a query is to the gold
      // rows) to itself, so only the in-process evaluation can count the episodes that had the gold rows.
      expect([remoteGold, remoteCopied]).toEqual([null, null]);
      expect([localGold, localCopied]).toEqual([1, 1]);
      expect(summary(remote.stdout)['success_rate']).toBe(1);
      const unreachable = await run([...args, '--url', 'ws://127.0.0.1:9']);
      expect(unreachable.code).toBe(1);
      expect(unreachable.stderr).toMatch(/127\.0\.0\.1:9/);
    } finally {
      await server.close();
      await runtime.close();
    }
  });
});
