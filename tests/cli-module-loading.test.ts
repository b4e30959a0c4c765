import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * `sqlenv report` and `sqlenv eval --save-eval` work on a run directory (@sqlenv/runs) and must not
 * load the queue: the CLI runs in a child process whose module resolutions are recorded by a loader
 * hook, and no module of @sqlenv/rollout or BullMQ may be among them.
 */
const scratch = mkdtempSync(join(tmpdir(), 'sqlenv-module-loading-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const bin = fileURLToPath(new URL('../apps/cli/bin/sqlenv.js', import.meta.url));
writeFileSync(
  join(scratch, 'hooks.mjs'),
  `import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  appendFileSync(process.env.SQLENV_TEST_LOAD_LOG, result.url + '\\n');
  return result;
}
`,
);
writeFileSync(join(scratch, 'register.mjs'), `import { register } from 'node:module';\nregister('./hooks.mjs', import.meta.url);\n`);

/** Run `sqlenv ...argv`; returns its exit code and every module URL it resolved. */
function sqlenvLoading(name: string, argv: readonly string[]): Promise<{ code: number; stderr: string; loaded: string[] }> {
  const log = join(scratch, `${name}.log`);
  writeFileSync(log, '');
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', '--import', join(scratch, 'register.mjs'), bin, ...argv],
      { env: { ...process.env, SQLENV_TEST_LOAD_LOG: log, LOG_LEVEL: 'silent' }, timeout: 120_000 },
      (error, _stdout, stderr) => {
        resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stderr, loaded: readFileSync(log, 'utf8').split('\n').filter((l) => l !== '') });
      },
    );
  });
}

const queueModules = (loaded: readonly string[]): string[] => loaded.filter((url) => /\/packages\/rollout\/|\/node_modules\/bullmq\/|\/node_modules\/ioredis\//.test(url));

describe('the run-directory commands load neither @sqlenv/rollout nor BullMQ', () => {
  it('sqlenv eval --save-eval, then sqlenv report', async () => {
    const runDir = join(scratch, 'run');
    const evaluated = await sqlenvLoading('eval', ['eval', '--policy', 'oracle', '--episodes', '2', '--save-eval', runDir, '--eval-name', 'before']);
    expect(evaluated.code, evaluated.stderr).toBe(0);
    expect(evaluated.loaded.some((url) => url.includes('/packages/runs/'))).toBe(true);
    expect(queueModules(evaluated.loaded)).toEqual([]);

    const reported = await sqlenvLoading('report', ['report', runDir]);
    expect(reported.code, reported.stderr).toBe(0);
    expect(reported.loaded.some((url) => url.includes('/packages/runs/src/run-report.ts'))).toBe(true);
    expect(queueModules(reported.loaded)).toEqual([]);
  }, 240_000);

  it('the check can fail: a command that does load the queue is seen (sqlenv train with a bad flag)', async () => {
    const refused = await sqlenvLoading('train', ['train', '--episodes', 'none']);
    expect(refused.code).toBe(2);
    expect(queueModules(refused.loaded)).not.toEqual([]);
  }, 120_000);
});
