import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { AppError, silentLogger } from '@sqlenv/shared';
import { readOptions } from './command-io.ts';
import { runtimeOptionsFrom } from './run-resources.ts';
import { RuntimeOptionsSchema, runtimeOptionSpecs } from './shared-options.ts';
import { runSpecFrom, SpecOptionsSchema, specOptionSpecs } from './spec-options.ts';
import { coordinatorCommand } from './coordinator-command.ts';

describe('readOptions + runSpecFrom', () => {
  it('takes the command line over the environment and leaves defaults to the spec schema', () => {
    const options = readOptions(['--episodes', '64', '--drop-zero-variance', 'false'], { SQLENV_EPISODES: '8', SQLENV_GROUP_SIZE: '2', RUN_ID: 'r1' }, specOptionSpecs, SpecOptionsSchema);
    const spec = runSpecFrom(options, () => 'fallback');
    expect(spec).toMatchObject({ run_id: 'r1', episodes: 64, group_size: 2, drop_zero_variance: false, max_staleness: 0, policy: 'oracle', dataset: 'builtin' });
  });

  it('reads the SQL executor settings of the runtime from the environment', () => {
    const options = readOptions([], { SQLENV_EXECUTOR_POOL_SIZE: '1', SQLENV_EXECUTOR_IN_PROCESS_MAX_MS: '0' }, runtimeOptionSpecs, RuntimeOptionsSchema);
    expect(runtimeOptionsFrom(options, silentLogger)).toMatchObject({ executorPoolSize: 1, executorInProcessMaxMs: 0 });
    expect(runtimeOptionsFrom(readOptions([], {}, runtimeOptionSpecs, RuntimeOptionsSchema), silentLogger)).not.toHaveProperty('executorInProcessMaxMs');
    expect(() => readOptions(['--executor-in-process-max-ms', '200'], {}, runtimeOptionSpecs, RuntimeOptionsSchema)).toThrow(/executorInProcessMaxMs/);
  });

  it('takes a run reward as JSON (--reward / SQLENV_REWARD) and refuses a bad one before the run starts', () => {
    const spec = runSpecFrom(readOptions(['--reward', '{"answerSimilarityScale":0.5}', '--episodes', '4'], {}, specOptionSpecs, SpecOptionsSchema), () => 'r');
    expect(spec.reward).toEqual({ answerSimilarityScale: 0.5 });
    expect(runSpecFrom(readOptions(['--episodes', '4'], {}, specOptionSpecs, SpecOptionsSchema), () => 'r').reward).toEqual({});
    expect(() => runSpecFrom(readOptions(['--episodes', '4'], { SQLENV_REWARD: '{"answerSimilarityScale":3}' }, specOptionSpecs, SpecOptionsSchema), () => 'r')).toThrow(/answerSimilarityScale/);
    expect(() => runSpecFrom(readOptions(['--episodes', '4', '--reward', 'half'], {}, specOptionSpecs, SpecOptionsSchema), () => 'r')).toThrow(/--reward must be a JSON object/);
    expect(() => runSpecFrom(readOptions(['--episodes', '4', '--reward', '{"noSuchTerm":1}'], {}, specOptionSpecs, SpecOptionsSchema), () => 'r')).toThrow(/noSuchTerm|unrecognized/i);
  });

  it('takes the negative-advantage weight λ in [0, 1] and refuses anything else by name', () => {
    expect(runSpecFrom(readOptions(['--negative-weight', '0', '--episodes', '4'], {}, specOptionSpecs, SpecOptionsSchema), () => 'r').negative_advantage_weight).toBe(0);
    expect(runSpecFrom(readOptions(['--episodes', '4'], { SQLENV_NEGATIVE_WEIGHT: '0.25' }, specOptionSpecs, SpecOptionsSchema), () => 'r').negative_advantage_weight).toBe(0.25);
    expect(runSpecFrom(readOptions(['--episodes', '4'], {}, specOptionSpecs, SpecOptionsSchema), () => 'r').negative_advantage_weight).toBe(1);
    for (const bad of ['-0.5', '1.5']) {
      expect(() => runSpecFrom(readOptions(['--episodes', '4'], { SQLENV_NEGATIVE_WEIGHT: bad }, specOptionSpecs, SpecOptionsSchema), () => 'r')).toThrow(/negative_advantage_weight/);
    }
    expect(() => readOptions(['--negative-weight', 'half', '--episodes', '4'], {}, specOptionSpecs, SpecOptionsSchema)).toThrow(/negative_advantage_weight/);
  });

  it('names the bad option', () => {
    expect(() => runSpecFrom(readOptions(['--episodes', 'many'], {}, specOptionSpecs, SpecOptionsSchema), () => 'r')).toThrow(/episodes/);
    expect(() => readOptions(['--no-such-flag', '1'], {}, specOptionSpecs, SpecOptionsSchema)).toThrow(AppError);
    expect(() => runSpecFrom(readOptions(['--run', 'bad id!', '--episodes', '4'], {}, specOptionSpecs, SpecOptionsSchema), () => 'r')).toThrow(/run id/);
  });

  it('fails a coordinator with a bad spec before touching Redis, exit code 2', async () => {
    let err = '';
    const stderr = new Writable({ write: (chunk: Buffer, _enc, done) => ((err += chunk.toString()), done()) });
    const code = await coordinatorCommand(['--episodes', '10', '--group-size', '4', '--redis', 'redis://127.0.0.1:1'], { stdout: new Writable({ write: (_c, _e, d) => d() }), stderr, env: {} });
    expect(code).toBe(2);
    expect(err).toMatch(/VALIDATION: .*multiple of group_size/);
  });
});
