import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { presetConfig } from '../io/presets.ts';
import { writeRandomCheckpoint } from '../io/random-checkpoint.ts';

// Minutes of CPU and ~1.2 GB of disk: opt-in. Result recorded in bench/results/generate.md.
const heavy = process.env['SQLENV_HEAVY_TESTS'] === '1';

describe.skipIf(!heavy)('Qwen3-0.6B shapes (random weights)', () => {
  it('loads from bf16 safetensors and generates on CPU within 6 GB RSS without pre-packing (measured in a child process)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sqlenv-qwen3-0.6b-'));
    try {
      writeRandomCheckpoint(dir, presetConfig('qwen3-0.6b'), { seed: 1, dtype: 'BF16' });
      const script = fileURLToPath(new URL('../testing/heavy-generate.ts', import.meta.url));
      const stdout = execFileSync(process.execPath, ['--import', 'tsx', script, dir, '1', '32', '8', 'no-prepack'], { encoding: 'utf8', timeout: 900_000 });
      const report = JSON.parse(stdout.trim().split('\n').at(-1) as string) as { generatedTokens: number; maxRssBytes: number };
      expect(report.generatedTokens).toBe(8);
      expect(report.maxRssBytes).toBeLessThan(6e9);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 1_200_000);
});
