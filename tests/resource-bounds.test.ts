import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '@sqlenv/cli';
import { presetConfig, writeRandomCheckpoint } from '@sqlenv/model';
import { ownCgroupPaths } from '@sqlenv/shared';

// Careless arguments and containers: every case ends at start with exit 2 and a message that names
// the flag, the bound and the value (or the estimate and the memory limit), never after minutes of
// work, an out-of-memory kill or a run that exits 0 having played nothing.

const scratch = mkdtempSync(join(tmpdir(), 'sqlenv-resource-bounds-'));
const shortContextModel = join(scratch, 'context-16');

beforeAll(() => {
  writeRandomCheckpoint(shortContextModel, { ...presetConfig('tiny-qwen3'), maxPositionEmbeddings: 16 }, { seed: 1 });
}, 60_000);
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function sink(): Writable & { text: () => string } {
  let text = '';
  const stream = new Writable({ write: (chunk: Buffer, _encoding, done) => ((text += chunk.toString('utf8')), done()) });
  return Object.assign(stream, { text: () => text });
}

async function sqlenv(argv: string[]): Promise<{ code: number; stderr: string }> {
  const stdout = sink();
  const stderr = sink();
  const code = await main(argv, { stdout, stderr, env: { SQLENV_CACHE_DIR: join(scratch, 'cache') } } as never);
  return { code, stderr: stderr.text() };
}

describe('eval: arguments bounded, refused at start', () => {
  it('takes a negative number as the value and says the bound (exit 2)', async () => {
    expect(await sqlenv(['eval', '--concurrency', '-1'])).toEqual({ code: 2, stderr: 'sqlenv eval: --concurrency must be ≥ 1, got -1\n' });
    expect(await sqlenv(['eval', '--episodes', '-3'])).toEqual({ code: 2, stderr: 'sqlenv eval: --episodes must be ≥ 1, got -3\n' });
    expect(await sqlenv(['eval', '--temperature', '-1'])).toEqual({ code: 2, stderr: 'sqlenv eval: --temperature must be ≥ 0, got -1\n' });
  });

  it('refuses --seeds 100000000, and questions × seeds beyond a million episodes, before playing', async () => {
    const seeds = await sqlenv(['eval', '--seeds', '100000000']);
    expect(seeds.code).toBe(2);
    expect(seeds.stderr).toMatch(/^sqlenv eval: --seeds must be ≤ 10,000, got 100000000: /);
    const product = await sqlenv(['eval', '--dataset', 'builtin', '--episodes', '1000', '--seeds', '10000']);
    expect(product.code).toBe(2);
    expect(product.stderr).toContain('1000 questions × --seeds 10000 = 10000000 episodes, more than the 1,000,000 one evaluation plays');
  });

  it('refuses more --threads than the cores', async () => {
    const cores = availableParallelism();
    const threads = await sqlenv(['eval', '--policy', 'model', '--model', shortContextModel, '--threads', String(cores + 1)]);
    expect(threads.code).toBe(2);
    expect(threads.stderr).toContain(`at most the ${cores} cores of this machine`);
  });

  it('refuses a model whose context cannot hold the system prompt, with both numbers, instead of playing every episode to context_exhausted', async () => {
    const run = await sqlenv(['eval', '--policy', 'model', '--model', shortContextModel, '--dataset', 'builtin', '--episodes', '2', '--threads', '1']);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/the system prompt \(with its tool definitions\) is \d+ tokens, \d+ with the generation prompt, and the context holds 16 tokens/);
  }, 120_000);
});

/**
 * A real memory limit: a child cgroup of this process's own, with a 1 GiB limit, and a process
 * moved into it. Only where this process may create cgroups (root with a writable cgroup mount).
 */
function childCgroup(): { dir: string; limitFile: string } | string {
  let own: ReturnType<typeof ownCgroupPaths>;
  try {
    own = ownCgroupPaths(readFileSync('/proc/self/cgroup', 'utf8'));
  } catch {
    return 'no /proc/self/cgroup';
  }
  const candidates = [
    ...(own.v2 === undefined ? [] : [{ parent: `/sys/fs/cgroup${own.v2 === '/' ? '' : own.v2}`, limitFile: 'memory.max' }]),
    ...(own.v1Memory === undefined ? [] : [{ parent: `/sys/fs/cgroup/memory${own.v1Memory === '/' ? '' : own.v1Memory}`, limitFile: 'memory.limit_in_bytes' }]),
  ];
  for (const { parent, limitFile } of candidates) {
    const dir = join(parent, `sqlenv-test-${process.pid}`);
    try {
      mkdirSync(dir);
      // A cgroup file system fills a new directory with its control files; a plain one (the tmpfs a hybrid layout mounts at the top) does not.
      if (!existsSync(join(dir, 'cgroup.procs'))) throw new Error(`${parent} is no cgroup hierarchy`);
      writeFileSync(join(dir, limitFile), String(2 ** 30));
      return { dir, limitFile };
    } catch {
      try {
        rmdirSync(dir);
      } catch {
        // never created
      }
    }
  }
  return 'this process may not create a child cgroup with a memory limit (not root, or no writable cgroup mount)';
}

/** Run an ES module (its lines) in a fresh Node process moved into the cgroup `dir` first; returns its stdout. */
function runInCgroup(dir: string, lines: readonly string[]): string {
  const run = spawnSync('sh', ['-c', `echo $$ > "$0/cgroup.procs" && exec "$1" --import tsx --input-type=module -e "$2"`, dir, process.execPath, lines.join('\n')], { encoding: 'utf8', timeout: 120_000 });
  expect(run.status, run.stderr).toBe(0);
  return run.stdout;
}

describe('the memory limit of a real cgroup', () => {
  const cgroup = childCgroup();
  if (typeof cgroup === 'string') console.warn(`resource-bounds.test: skipping the real cgroup case: ${cgroup}`);
  afterAll(() => {
    if (typeof cgroup !== 'string') rmdirSync(cgroup.dir);
  });

  it.skipIf(typeof cgroup === 'string')('a process in a 1 GiB cgroup reads that limit and refuses Qwen3-0.6B weights with the estimate and the limit', () => {
    if (typeof cgroup === 'string') return;
    const stdout = runInCgroup(cgroup.dir, [
      "import { readMemoryLimit } from '@sqlenv/shared';",
      "import { checkModelFits, presetConfig } from '@sqlenv/model';",
      'const limit = readMemoryLimit();',
      "let message = '';",
      "try { checkModelFits(presetConfig('qwen3-0.6b'), 'qwen3/config.json'); } catch (error) { message = error.message; }",
      'console.log(JSON.stringify({ limit, message }));',
    ]);
    const { limit, message } = JSON.parse(stdout) as { limit: { bytes: number; path?: string }; message: string };
    expect(limit.bytes).toBe(2 ** 30);
    expect(limit.path).toBe(join(cgroup.dir, cgroup.limitFile));
    expect(message).toContain(`qwen3/config.json: needs at least 2.38 GB of memory, more than the cgroup v`);
    expect(message).toContain(`(${join(cgroup.dir, cgroup.limitFile)}), 1.07 GB: weights 2.38 GB`);
  }, 180_000);

  it.skipIf(typeof cgroup === 'string')('the GRPO learner in that cgroup shrinks its micro-batch to fit, and is refused where nothing fits', () => {
    if (typeof cgroup === 'string') return;
    // A Qwen3-0.6B cut to 4 layers (0.88 GB of weights) leaves ~0.1 GB for a micro-batch's activations; to 8 layers, nothing.
    const stdout = runInCgroup(cgroup.dir, [
      "import { readMemoryLimit } from '@sqlenv/shared';",
      "import { presetConfig } from '@sqlenv/model';",
      "import { planLearnerMemory } from '@sqlenv/grpo';",
      'const limit = readMemoryLimit();',
      "const lora = { rank: 16, targets: ['q_proj', 'k_proj', 'v_proj', 'o_proj'] };",
      "const plan = (numLayers) => { try { return planLearnerMemory({ config: presetConfig('qwen3-0.6b', { numLayers }), lora, microBatchTokens: 4096, recompute: 'auto', explicit: false, limit }); } catch (error) { return { refused: error.message }; } };",
      'console.log(JSON.stringify({ limit, fits: plan(4), none: plan(8) }));',
    ]);
    const { limit, fits, none } = JSON.parse(stdout) as { limit: { bytes: number }; fits: { microBatchTokens: number; reduced: boolean; activationBytes: number; budgetBytes: number }; none: { refused: string } };
    expect(limit.bytes).toBe(2 ** 30);
    expect(fits.reduced).toBe(true);
    expect(fits.microBatchTokens).toBeLessThan(4096);
    expect(fits.microBatchTokens).toBeGreaterThanOrEqual(256);
    expect(fits.activationBytes).toBeLessThanOrEqual(fits.budgetBytes);
    expect(none.refused).toContain(`the learner does not fit in the cgroup v`);
    expect(none.refused).toContain(`(${join(cgroup.dir, cgroup.limitFile)}), 1.07 GB: weights, adapter, gradient and AdamW moments`);
  }, 180_000);
});
