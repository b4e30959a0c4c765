import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uniformsForSeed } from './batch.ts';
import { Generator, type RowInput, type RowOutput } from './generator.ts';
import { loadModel } from '../io/weights.ts';

/**
 * How much a turn's log-probs move with the batch it runs in (docs/inference.md, "Exactness"): the
 * same turn (prompt, seed, temperature 1) alone, beside batch-mates of other lengths (so its row is
 * padded wider), at another row, padded to a wider bucket, and continued from its own cached prefix,
 * on the trained sqlenv-tiny checkpoint. The kernels' float rounding differs with the shapes, so the
 * log-probs differ; they stay within LOGPROB_BATCH_BOUND.
 */
const LOGPROB_BATCH_BOUND = 5e-5;

const modelDir = fileURLToPath(new URL('../../../../models/sqlenv-tiny', import.meta.url));
const STEPS = 24;
const ids = (n: number, salt: number): number[] => Array.from({ length: n }, (_, i) => 300 + ((i * 37 + salt * 101) % 1700));
const target = ids(330, 1);
const uniforms = uniformsForSeed(77, STEPS);
const row = (inputIds: readonly number[], u: Float32Array = uniforms): RowInput => ({ inputIds, uniforms: u, temperature: 1 });
const mate = (length: number, salt: number): RowInput => row(ids(length, salt), uniformsForSeed(salt, STEPS));

let generator: Generator;
beforeAll(async () => {
  const { config, weights } = loadModel(modelDir);
  generator = await Generator.create(config, weights, { session: { mode: 'direct' } });
}, 60_000);
afterAll(async () => {
  await generator.close();
});

/** The target's output in a run of `rows` with the target at `at`. */
async function targetIn(mates: readonly RowInput[], at: number, padToWidth?: number): Promise<RowOutput> {
  const rows = [...mates.slice(0, at), row(target), ...mates.slice(at)];
  const out = await generator.runRows(rows, { steps: STEPS, keepCache: false, stopIds: [], ...(padToWidth === undefined ? {} : { padToWidth }) });
  return out[at] as RowOutput;
}

/** Largest |Δ log-prob| over the tokens both runs sampled alike (a near-tie may flip a token, after which the turns differ). */
function maxDelta(a: RowOutput, b: RowOutput): { delta: number; common: number } {
  let common = 0;
  while (common < Math.min(a.tokens.length, b.tokens.length) && a.tokens[common] === b.tokens[common]) common++;
  let delta = 0;
  for (let i = 0; i < common; i++) delta = Math.max(delta, Math.abs((a.logprobs[i] as number) - (b.logprobs[i] as number)));
  return { delta, common };
}

describe('a turn\'s log-probs across batch shapes', () => {
  it(`stay within ${LOGPROB_BATCH_BOUND} of the turn run alone`, async () => {
    const alone = await targetIn([], 0);
    const shapes: Array<[string, Promise<RowOutput>]> = [
      ['one shorter mate', targetIn([mate(40, 2)], 1)],
      ['three longer mates (wider padding)', targetIn([mate(500, 3), mate(410, 4), mate(12, 5)], 2)],
      ['eleven mates, in the middle', targetIn(Array.from({ length: 11 }, (_, i) => mate(20 + 45 * i, 10 + i)), 5)],
      ['padded to 384', targetIn([], 0, 384)],
    ];
    const results: Array<[string, { delta: number; common: number }]> = [];
    for (const [name, run] of shapes) results.push([name, maxDelta(alone, await run)]);
    // Its own first 200 tokens cached by an earlier run, the rest fed now (a kept KV cache's path).
    const [prefix] = await generator.runRows([row(target.slice(0, 200))], { steps: 1, keepCache: true, stopIds: [] });
    const [continued] = await generator.runRows([{ ...row(target.slice(199)), cache: prefix!.cache!.truncate(199) }], { steps: STEPS, keepCache: false, stopIds: [] });
    results.push(['continued from a cached prefix', maxDelta(alone, continued as RowOutput)]);
    for (const [name, { delta, common }] of results) {
      expect(common, name).toBeGreaterThanOrEqual(8);
      expect(delta, name).toBeLessThanOrEqual(LOGPROB_BATCH_BOUND);
    }
    // The shapes do change the rounding: identical log-probs everywhere would mean this test measures nothing.
    expect(Math.max(...results.map(([, r]) => r.delta))).toBeGreaterThan(0);
  }, 120_000);
});
