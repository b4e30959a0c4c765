/**
 * ONNX Runtime's weight pre-packing on and off for the generation graph: the speed of a generate
 * call and the memory of the session, per model size, each configuration in its own child process
 * (so its peak RSS is its own), on and off alternating. What the threshold of
 * `prepackingDecision` (packages/model/src/runtime/prepacking.ts) was chosen from.
 *
 *   npm run bench:prepacking
 *   BENCH_MODELS=sqlenv-tiny BENCH_ROUNDS=1 BENCH_RESULTS_DIR=/tmp/r npm run bench:prepacking   # smallest
 *
 * Writes <results dir>/prepacking.md and .json.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Generator, loadModel, presetConfig, writeRandomCheckpoint } from '@sqlenv/model';
import { childPayload, interleavedRounds, replyToParent, runChild, startBench } from './lib/harness.ts';

interface Case {
  model: string;
  dir: string;
  batch: number;
  promptTokens: number;
  newTokens: number;
  prepacking: boolean;
  repeats: number;
}

interface Row extends Omit<Case, 'dir'> {
  weightMiB: number;
  generateMs: number;
  peakRssMiB: number;
  settledRssMiB: number;
}

const rssMiB = (): number => Math.round(Number(/VmRSS:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? 0) / 1024);
const hwmMiB = (): number => Math.round(Number(/VmHWM:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? 0) / 1024);

const child = childPayload() as Case | undefined;
if (child !== undefined) {
  const c = child;
  const { config, weights } = loadModel(c.dir);
  let weightBytes = 0;
  for (const w of weights.values()) weightBytes += w.data.byteLength;
  const generator = await Generator.create(config, weights, { session: { intraOpThreads: 1, sessionConfig: { 'session.disable_prepacking': c.prepacking ? '0' : '1' } } });
  const requests = Array.from({ length: c.batch }, (_, b) => ({
    promptIds: Array.from({ length: c.promptTokens }, (_, t) => (t * 7919 + b * 104_729) % config.vocabSize),
    seed: b,
    temperature: 1,
  }));
  const times: number[] = [];
  for (let i = 0; i <= c.repeats; i++) {
    const started = performance.now();
    await generator.generate(requests, { maxNewTokens: c.newTokens, stopIds: [] });
    if (i > 0) times.push(performance.now() - started); // the first run is a warm-up
  }
  (globalThis as { gc?: () => void }).gc?.();
  const settledRssMiB = rssMiB();
  await generator.close();
  const { dir: _dir, ...rest } = c;
  const row: Row = { ...rest, weightMiB: Math.round(weightBytes / 2 ** 20), generateMs: Math.round(Math.min(...times)), peakRssMiB: hwmMiB(), settledRssMiB };
  replyToParent(row);
  process.exit(0);
}

const here = fileURLToPath(new URL('.', import.meta.url));
const MODELS = (process.env['BENCH_MODELS'] ?? 'sqlenv-tiny,smollm2-135m').split(',');
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 2);
const bench = startBench('prepacking');
const root = mkdtempSync(join(tmpdir(), 'sqlenv-bench-prepacking-'));
const cases: Omit<Case, 'prepacking'>[] = [];
if (MODELS.includes('sqlenv-tiny')) {
  const dir = join(here, '..', 'models', 'sqlenv-tiny');
  cases.push({ model: 'sqlenv-tiny', dir, batch: 8, promptTokens: 600, newTokens: 16, repeats: 3 });
  cases.push({ model: 'sqlenv-tiny', dir, batch: 32, promptTokens: 16, newTokens: 64, repeats: 3 });
}
if (MODELS.includes('smollm2-135m')) {
  const dir = join(root, 'smollm2-135m');
  writeRandomCheckpoint(dir, presetConfig('smollm2-135m'), { seed: 1, initStd: 0.02 });
  cases.push({ model: 'smollm2-135m shapes', dir, batch: 8, promptTokens: 128, newTokens: 16, repeats: 1 });
}
const rows: Row[] = [];
for (const c of cases) {
  // On and off alternate, the order mirrored every other round.
  const runs = await interleavedRounds([true, false], ROUNDS, (prepacking) => runChild(fileURLToPath(import.meta.url), { ...c, prepacking }, { execArgv: ['--expose-gc'] }) as Row, ({ result }) => process.stderr.write(`${JSON.stringify(result)}\n`), { mirrored: true });
  rows.push(...runs.map((r) => r.result));
}
rmSync(root, { recursive: true, force: true });
const markdown = `ORT intra-op threads 1.

| model | weights (MiB) | rows × prompt + new | pre-packing | generate (ms, best of ${cases[0]?.repeats ?? 0} after a warm-up) | peak RSS (MiB) | RSS after (MiB) |
| --- | ---: | --- | --- | ---: | ---: | ---: |
${rows.map((r) => `| ${r.model} | ${r.weightMiB} | ${r.batch} × ${r.promptTokens} + ${r.newTokens} | ${r.prepacking ? 'on' : 'off'} | ${r.generateMs} | ${r.peakRssMiB} | ${r.settledRssMiB} |`).join('\n')}

- Each row is one child process: load the checkpoint, create the generator from memory (float32 weights kept by the caller),
  one warm-up call, then the timed calls. On and off alternate, ${ROUNDS} rounds per case; the cores are shared with other
  work (load average above), so compare rows of one case, not cases.
`;
bench.write({ title: 'ONNX Runtime weight pre-packing, on and off (generation graph, CPU)', body: [markdown], data: { rounds: ROUNDS, rows } });
process.stdout.write(markdown);
