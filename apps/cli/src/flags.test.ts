import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { UsageError } from './cli-error.ts';
import { booleanText, episodesFlag, MAX_EPISODES, MAX_SEEDS, parseFlags, positiveIntFlag, seedsFlag, wantsHelp, type FlagSpec } from './flags.ts';

const specs: Record<string, FlagSpec> = {
  episodes: { key: 'episodes', env: 'SQLENV_EPISODES' },
  json: { type: 'boolean' },
  'dry-run': { key: 'dryRun', type: 'boolean', env: 'SQLENV_DRY_RUN' },
  name: {},
};
const Schema = z.object({
  episodes: z.coerce.number().int().positive().default(8),
  json: z.boolean().default(false),
  dryRun: booleanText.default(false),
  name: z.string().optional(),
});

describe('parseFlags: the one flag parser', () => {
  it('takes a flag over its environment variable, the variable over the default', () => {
    expect(parseFlags(['--episodes', '3'], specs, Schema, { env: { SQLENV_EPISODES: '5' } }).flags).toMatchObject({ episodes: 3 });
    expect(parseFlags([], specs, Schema, { env: { SQLENV_EPISODES: '5', SQLENV_DRY_RUN: '1' } }).flags).toMatchObject({ episodes: 5, dryRun: true });
    expect(parseFlags([], specs, Schema).flags).toEqual({ episodes: 8, json: false, dryRun: false });
  });

  it('reads no environment without `env`, and counts an empty value of an env-backed flag as not given', () => {
    expect(parseFlags([], specs, Schema, { env: { SQLENV_EPISODES: '' } }).flags.episodes).toBe(8);
    expect(parseFlags(['--episodes', ''], specs, Schema).flags.episodes).toBe(8);
    expect(parseFlags(['--name', ''], specs, Schema).flags.name).toBe('');
  });

  it('refuses with a UsageError (exit 2) naming the flag, the sub-command and the variable a bad value came from', () => {
    expect(() => parseFlags(['--episodes', '0'], specs, Schema)).toThrow(UsageError);
    expect(() => parseFlags(['--episodes', '0'], specs, Schema)).toThrow(/^--episodes must be ≥ 1, got 0$/);
    expect(() => parseFlags([], specs, Schema, { env: { SQLENV_EPISODES: 'many' } })).toThrow(/episodes: .*\(from SQLENV_EPISODES\)$/);
    expect(() => parseFlags(['--episodes', 'many'], specs, Schema, { env: { SQLENV_EPISODES: '4' } })).not.toThrow(/SQLENV_EPISODES/);
    expect(() => parseFlags(['--bogus'], specs, Schema, { command: 'model init' })).toThrow(/^init: Unknown option '--bogus'/);
    expect(() => parseFlags(['stray'], specs, Schema)).toThrow(UsageError);
  });

  it('takes a negative number as the value of its flag, and says which bound it breaks', () => {
    const bounded: Record<string, FlagSpec> = { concurrency: {}, episodes: {}, seeds: {}, temperature: {}, 'top-p': { key: 'topP' }, json: { type: 'boolean' } };
    const Bounded = z.object({
      concurrency: positiveIntFlag.default(8),
      episodes: episodesFlag.default(50),
      seeds: seedsFlag.default(1),
      temperature: z.coerce.number().finite().nonnegative().default(0),
      topP: z.coerce.number().gt(0).max(1).optional(),
      json: z.boolean().default(false),
    });
    const message = (argv: string[]): string => {
      try {
        parseFlags(argv, bounded, Bounded);
      } catch (error) {
        expect(error).toBeInstanceOf(UsageError);
        return (error as Error).message;
      }
      return 'accepted';
    };
    expect(message(['--concurrency', '-1'])).toBe('--concurrency must be ≥ 1, got -1');
    expect(message(['--episodes', '-3'])).toBe('--episodes must be ≥ 1, got -3');
    expect(message(['--temperature', '-1'])).toBe('--temperature must be ≥ 0, got -1');
    expect(message(['--top-p', '-0.5'])).toBe('--top-p must be > 0, got -0.5');
    expect(message(['--seeds', '100000000'])).toMatch(/^--seeds must be ≤ 10,000, got 100000000: /);
    expect(message(['--episodes', String(MAX_EPISODES + 1)])).toMatch(/^--episodes must be ≤ 1,000,000, got 1000001: /);
    expect(message(['--seeds', String(MAX_SEEDS), '--episodes', String(MAX_EPISODES), '--json'])).toBe('accepted');
    // After `--` a negative number is a positional, as before.
    expect(parseFlags(['--', '-1'], bounded, Bounded, { positionals: 1 }).positionals).toEqual(['-1']);
  });

  it('returns positionals up to the number allowed', () => {
    expect(parseFlags(['DIR', '--json'], specs, Schema, { positionals: 1 })).toMatchObject({ positionals: ['DIR'], flags: { json: true } });
    expect(() => parseFlags(['A', 'B'], specs, Schema, { positionals: 1, command: 'datasets check' })).toThrow(/^check: unexpected argument 'B'/);
  });

  it('wantsHelp: --help or -h before the options end', () => {
    expect(wantsHelp(['--episodes', '3', '-h'])).toBe(true);
    expect(wantsHelp(['--', '--help'])).toBe(false);
  });
});
