import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { coordinatorCommand, reportCommand, runsCommand, serveModelCommand, sftCommand, trainCommand, trainerCommand, workerCommand, type CommandIo } from '@sqlenv/cli';
import { silentLogger } from '@sqlenv/shared';
import { commands, main } from '@sqlenv/cli';
import { captureIo } from '@sqlenv/shared/testing';

/**
 * `--help` on every command and sub-command prints its usage and exits 0. The list is walked from
 * the CLI's own command table, so a command added later is covered without touching this test; the
 * distributed apps' own entry points (one container each) answer it too.
 */
async function sqlenv(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const io = captureIo();
  const code = await main(argv, { stdout: io.stdout, stderr: io.stderr as unknown as NodeJS.WriteStream, logger: silentLogger });
  return { code, ...io.text() };
}

const invocations = Object.entries(commands).flatMap(([name, command]) => [
  [name, '--help'],
  [name, '-h'],
  // Help wins over whatever else is on the line, valid or not.
  [name, '--no-such-option', '--help'],
  ...(command.subcommands ?? []).flatMap((sub) => [
    [name, sub, '--help'],
    [name, sub, 'some-argument', '-h'],
  ]),
]);

describe('sqlenv <command> --help', () => {
  it('covers every command of the table (and the table is not empty)', () => {
    expect(Object.keys(commands)).toEqual(expect.arrayContaining(['model', 'coordinator', 'worker', 'trainer', 'runs', 'datasets', 'sft', 'serve', 'serve-model', 'eval', 'play', 'learn', 'train', 'report', 'sft-data']));
  });

  it.each(invocations)('sqlenv %s %s … prints the usage and exits 0', async (...argv: string[]) => {
    const name = argv[0] as string;
    const result = await sqlenv(argv);
    expect(result.code, result.err).toBe(0);
    expect(result.err).toBe('');
    expect(result.out).toContain(`sqlenv ${name}`);
    expect(result.out.toLowerCase()).toContain('usage');
  });

  it('a word after the options end (--) is not a help request', async () => {
    const result = await sqlenv(['report', '--', '--help']);
    expect(result.code).toBe(2);
  });
});

describe('the rollout commands themselves (the apps call them without sqlenv)', () => {
  it.each([
    ['coordinator', coordinatorCommand],
    ['worker', workerCommand],
    ['trainer', trainerCommand],
    ['train', trainCommand],
    ['sft', sftCommand],
    ['report', reportCommand],
    ['runs', runsCommand],
    ['serve-model', serveModelCommand],
  ] as const)('%s --help prints its usage, exit 0, without connecting anywhere', async (name, command) => {
    const io = captureIo();
    // A Redis nobody listens on: help must not need one.
    const rolloutIo: CommandIo = { stdout: io.stdout, stderr: io.stderr, env: { REDIS_URL: 'redis://127.0.0.1:1' } };
    expect(await command(['--help'], rolloutIo)).toBe(0);
    expect(io.text().out).toMatch(new RegExp(`^usage: sqlenv ${name}\\b`));
  });

  it.each(['coordinator', 'worker', 'trainer'])('apps/%s/src/main.ts --help exits 0 with the usage', async (app) => {
    const entry = fileURLToPath(new URL(`../apps/${app}/src/main.ts`, import.meta.url));
    const result = await new Promise<{ code: number; stdout: string }>((resolve) => {
      execFile(process.execPath, ['--import', 'tsx', entry, '--help'], { env: { ...process.env, REDIS_URL: 'redis://127.0.0.1:1' }, timeout: 60_000 }, (error, stdout) => {
        resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout });
      });
    });
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(new RegExp(`^usage: sqlenv ${app}\\b`));
  }, 90_000);
});
