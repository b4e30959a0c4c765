import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { AppError, silentLogger } from '@sqlenv/shared';
import { runtimeOptionsFrom } from '@sqlenv/rollout';
import { parseFlags } from '../flags.ts';
import { RuntimeOptionsSchema, runtimeOptionSpecs } from './transport-options.ts';
import { runSpecFrom, SpecOptionsSchema, specOptionSpecs } from './spec-options.ts';
import { coordinatorCommand } from './coordinator.ts';
import { trainerCommand } from './trainer.ts';

describe('parseFlags + runSpecFrom', () => {
  it('takes the command line over the environment and leaves defaults to the spec schema', () => {
    const options = parseFlags(['--episodes', '64', '--drop-zero-variance', 'false'], specOptionSpecs, SpecOptionsSchema, { env: { SQLENV_EPISODES: '8', SQLENV_GROUP_SIZE: '2', RUN_ID: 'r1' } }).flags;
    const spec = runSpecFrom(options, () => 'fallback');
    expect(spec).toMatchObject({ run_id: 'r1', episodes: 64, group_size: 2, drop_zero_variance: false, max_staleness: 0, policy: 'oracle', dataset: 'builtin' });
  });

  it('reads the SQL executor settings of the runtime from the environment', () => {
    const options = parseFlags([], runtimeOptionSpecs, RuntimeOptionsSchema, { env: { SQLENV_EXECUTOR_POOL_SIZE: '1', SQLENV_EXECUTOR_IN_PROCESS_MAX_MS: '0' } }).flags;
    expect(runtimeOptionsFrom(options, silentLogger)).toMatchObject({ executorPoolSize: 1, executorInProcessMaxMs: 0 });
    expect(runtimeOptionsFrom(parseFlags([], runtimeOptionSpecs, RuntimeOptionsSchema, { env: {} }).flags, silentLogger)).not.toHaveProperty('executorInProcessMaxMs');
    expect(() => parseFlags(['--executor-in-process-max-ms', '200'], runtimeOptionSpecs, RuntimeOptionsSchema, { env: {} }).flags).toThrow(/^--executor-in-process-max-ms must be ≤ 100, got 200/);
  });

  it('takes a run reward as JSON (--reward / SQLENV_REWARD) and refuses a bad one before the run starts', () => {
    const spec = runSpecFrom(parseFlags(['--reward', '{"answerSimilarityScale":0.5}', '--episodes', '4'], specOptionSpecs, SpecOptionsSchema, { env: {} }).flags, () => 'r');
    expect(spec.reward).toEqual({ answerSimilarityScale: 0.5 });
    expect(runSpecFrom(parseFlags(['--episodes', '4'], specOptionSpecs, SpecOptionsSchema, { env: {} }).flags, () => 'r').reward).toEqual({});
    expect(() => runSpecFrom(parseFlags(['--episodes', '4'], specOptionSpecs, SpecOptionsSchema, { env: { SQLENV_REWARD: '{"answerSimilarityScale":3}' } }).flags, () => 'r')).toThrow(/answerSimilarityScale/);
    expect(() => runSpecFrom(parseFlags(['--episodes', '4', '--reward', 'half'], specOptionSpecs, SpecOptionsSchema, { env: {} }).flags, () => 'r')).toThrow(/--reward must be a JSON object/);
    expect(() => runSpecFrom(parseFlags(['--episodes', '4', '--reward', '{"noSuchTerm":1}'], specOptionSpecs, SpecOptionsSchema, { env: {} }).flags, () => 'r')).toThrow(/noSuchTerm|unrecognized/i);
  });

  it('takes the negative-advantage weight λ in [0, 1] and refuses anything else by name', () => {
    expect(runSpecFrom(parseFlags(['--negative-weight', '0', '--episodes', '4'], specOptionSpecs, SpecOptionsSchema, { env: {} }).flags, () => 'r').negative_advantage_weight).toBe(0);
    expect(runSpecFrom(parseFlags(['--episodes', '4'], specOptionSpecs, SpecOptionsSchema, { env: { SQLENV_NEGATIVE_WEIGHT: '0.25' } }).flags, () => 'r').negative_advantage_weight).toBe(0.25);
    expect(runSpecFrom(parseFlags(['--episodes', '4'], specOptionSpecs, SpecOptionsSchema, { env: {} }).flags, () => 'r').negative_advantage_weight).toBe(1);
    for (const bad of ['-0.5', '1.5']) {
      expect(() => runSpecFrom(parseFlags(['--episodes', '4'], specOptionSpecs, SpecOptionsSchema, { env: { SQLENV_NEGATIVE_WEIGHT: bad } }).flags, () => 'r')).toThrow(/negative_advantage_weight/);
    }
    expect(() => parseFlags(['--negative-weight', 'half', '--episodes', '4'], specOptionSpecs, SpecOptionsSchema, { env: {} }).flags).toThrow(/negative_advantage_weight/);
  });

  it('names the bad option', () => {
    expect(() => runSpecFrom(parseFlags(['--episodes', 'many'], specOptionSpecs, SpecOptionsSchema, { env: {} }).flags, () => 'r')).toThrow(/episodes/);
    expect(() => parseFlags(['--no-such-flag', '1'], specOptionSpecs, SpecOptionsSchema, { env: {} }).flags).toThrow(AppError);
    expect(() => runSpecFrom(parseFlags(['--run', 'bad id!', '--episodes', '4'], specOptionSpecs, SpecOptionsSchema, { env: {} }).flags, () => 'r')).toThrow(/run id/);
  });

  it('refuses a trainer --tis-cap that is not a finite number ≥ 0 (flag or SQLENV_TIS_CAP) before touching Redis, exit code 2', async () => {
    for (const [argv, env] of [[['--tis-cap=-1'], {}], [['--tis-cap', '-1'], {}], [['--tis-cap', 'Infinity'], {}], [[], { SQLENV_TIS_CAP: 'off' }]] as const) {
      let err = '';
      const stderr = new Writable({ write: (chunk: Buffer, _enc, done) => ((err += chunk.toString()), done()) });
      const code = await trainerCommand([...argv, '--redis', 'redis://127.0.0.1:1'], { stdout: new Writable({ write: (_c, _e, d) => d() }), stderr, env });
      expect(code, err).toBe(2);
      expect(err).toMatch(/--tis-cap must be ≥ 0, got -1|tisCap|SQLENV_TIS_CAP/);
    }
  });

  it('fails a coordinator with a bad spec before touching Redis, exit code 2', async () => {
    let err = '';
    const stderr = new Writable({ write: (chunk: Buffer, _enc, done) => ((err += chunk.toString()), done()) });
    const code = await coordinatorCommand(['--episodes', '10', '--group-size', '4', '--redis', 'redis://127.0.0.1:1'], { stdout: new Writable({ write: (_c, _e, d) => d() }), stderr, env: {} });
    expect(code).toBe(2);
    expect(err).toMatch(/VALIDATION: .*multiple of group_size/);
  });
});
