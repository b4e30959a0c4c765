import { describe, expect, it } from 'vitest';
import { createBaselinePolicy, evaluate, type Policy } from '@sqlenv/agents';
import { createSqlEnvRuntime } from '@sqlenv/sql-env';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { evalExitCode } from './commands/eval.ts';

// `sqlenv eval` exits non-zero when every episode errored (issue 23: a NaN model reported 0 %
// success with exit 0), and zero when the policy merely plays badly.
describe('eval exit code', () => {
  it('is 1 with the count and the first error when every episode errors, 0 otherwise', async () => {
    const cacheDir = mkdtempSync(join(tmpdir(), 'sqlenv-eval-exit-'));
    const runtime = await createSqlEnvRuntime({ dataset: 'builtin', cacheDir });
    try {
      const broken: Policy = {
        name: 'broken',
        begin: () => ({
          act: () => Promise.reject(new Error('tensor model.norm.weight holds NaN')),
        }),
      };
      const questionIds = runtime.dataset.questionsOf('dev').slice(0, 3).map((q) => q.question_id);
      let written = '';
      const stderr = { write: (text: string) => ((written += text), true) };
      const failed = await evaluate(() => runtime.createEnvironment(), broken, { questionIds, seed: 0, concurrency: 2 });
      expect(failed.errors).toBe(3);
      expect(evalExitCode(failed, stderr)).toBe(1);
      expect(written).toBe('sqlenv eval: all 3 episodes ended in an error; the first: tensor model.norm.weight holds NaN\n');

      const random = await evaluate(() => runtime.createEnvironment(), createBaselinePolicy('random', runtime.dataset, 0), { questionIds, seed: 0, concurrency: 2 });
      written = '';
      expect(evalExitCode(random, stderr)).toBe(0);
      expect(written).toBe('');
    } finally {
      await runtime.close();
      rmSync(cacheDir, { recursive: true, force: true });
    }
  }, 60_000);
});
