/**
 * Child-process probe for the real-shape memory test (qwen3-0.6b.test.ts) and
 * bench/results/generate.md: load a checkpoint directory, build the
 * generation session, generate, and print one JSON line with timings and the
 * process's peak RSS. Run: node --import tsx heavy-generate.ts DIR [BATCH] [PROMPT_TOKENS] [NEW_TOKENS] [LAYOUT]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Generator } from '../runtime/generator.ts';
import { loadModel } from '../io/weights.ts';

const LAYOUTS = ['no-prepack', 'file', 'in-place', 'default'] as const;
const [dir, batchArg = '1', promptArg = '32', newArg = '16', layoutArg = 'no-prepack'] = process.argv.slice(2);
if (dir === undefined) throw new Error(`usage: heavy-generate.ts DIR [BATCH] [PROMPT_TOKENS] [NEW_TOKENS] [${LAYOUTS.join('|')}]`);
const layout = LAYOUTS.find((l) => l === layoutArg);
if (layout === undefined) throw new Error(`layout: expected ${LAYOUTS.join(' | ')}, got ${layoutArg}`);
const batch = Number(batchArg);
const promptTokens = Number(promptArg);
const newTokens = Number(newArg);

const t0 = performance.now();
let loaded: ReturnType<typeof loadModel> | undefined = loadModel(dir);
const config = loaded.config;
const t1 = performance.now();
// 'no-prepack': ORT keeps one copy of each weight (session.disable_prepacking); 'file': the same,
// loaded by ORT from a model file with the JS weights released first; 'in-place': the W·xᵀ layout
// that ORT does not pre-pack; 'default': Gemm with pre-packing (two copies).
const fileDir = layout === 'file' ? mkdtempSync(join(tmpdir(), 'sqlenv-heavy-model-')) : undefined;
const generator = await Generator.create(config, loaded.weights, {
  inPlaceWeights: layout === 'in-place',
  session: { intraOpThreads: 2, ...(layout === 'no-prepack' || layout === 'file' ? { sessionConfig: { 'session.disable_prepacking': '1' } } : {}) },
  ...(fileDir === undefined ? {} : { modelFile: join(fileDir, 'generation.onnx'), releaseWeights: true }),
});
if (fileDir !== undefined) rmSync(fileDir, { recursive: true, force: true });
const createPeakRssBytes = process.resourceUsage().maxRSS * 1024; // peak up to a ready session
loaded = undefined; // the session holds its own copy: let the float32 arrays go
const t2 = performance.now();
const requests = Array.from({ length: batch }, (_, b) => ({
  promptIds: Array.from({ length: promptTokens }, (_, t) => (t * 7919 + b * 104_729) % 151_000),
  seed: b,
  temperature: 0.7,
}));
const results = await generator.generate(requests, { maxNewTokens: newTokens, stopIds: [] });
const t3 = performance.now();
await generator.close();
const usage = process.resourceUsage();
process.stdout.write(
  `${JSON.stringify({
    layout,
    batch,
    promptTokens,
    newTokens,
    generatedTokens: results.reduce((s, r) => s + r.tokens.length, 0),
    loadMs: Math.round(t1 - t0),
    sessionMs: Math.round(t2 - t1),
    generateMs: Math.round(t3 - t2),
    createPeakRssBytes,
    maxRssBytes: usage.maxRSS * 1024,
  })}\n`,
);
