import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { UsageError } from './cli-error.ts';
import { booleanText, parseFlags, wantsHelp, type FlagSpec } from './flags.ts';

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
    expect(() => parseFlags(['--episodes', '0'], specs, Schema)).toThrow(/^episodes: /);
    expect(() => parseFlags([], specs, Schema, { env: { SQLENV_EPISODES: 'many' } })).toThrow(/episodes: .*\(from SQLENV_EPISODES\)$/);
    expect(() => parseFlags(['--episodes', 'many'], specs, Schema, { env: { SQLENV_EPISODES: '4' } })).not.toThrow(/SQLENV_EPISODES/);
    expect(() => parseFlags(['--bogus'], specs, Schema, { command: 'model init' })).toThrow(/^init: Unknown option '--bogus'/);
    expect(() => parseFlags(['stray'], specs, Schema)).toThrow(UsageError);
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
