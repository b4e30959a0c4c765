import { createSession, Graph, tensor, type GraphSession, type SessionConfig, type Tensor, type TensorData } from '@sqlenv/onnx-graph';
import { leftPad } from '../runtime/batch.ts';
import type { ModelConfig } from '../io/config.ts';
import { attentionBiasAndPositions, declareDecoderParams, decoderForward, embedTokens, lmHeadLogits, type DecoderBuildOptions, type KvCache } from './decoder.ts';
import { IO } from './forward-graphs.ts';
import type { ModelWeights } from '../io/weights.ts';

/** Names of the step graph's cache inputs/outputs for layer i. */
export const STEP_IO = {
  pastMask: 'past_mask',
  pastKey: (i: number) => `past_key.${i}`,
  pastValue: (i: number) => `past_value.${i}`,
  presentKey: (i: number) => `present_key.${i}`,
  presentValue: (i: number) => `present_value.${i}`,
  lastLogits: 'last_logits',
} as const;

/**
 * One decoder call with the KV cache as graph inputs and outputs: the
 * classic per-token loop where the host feeds the cache back every token.
 * Kept as the baseline the in-graph Loop is measured against
 * (bench/generate.bench.ts) and for hosts that can keep tensors on the
 * device between runs. Inputs: `input_ids`, `attention_mask` (B, T) for the
 * new slots, `past_mask` (B, S) and per-layer `past_key.i` / `past_value.i`
 * (B, Hkv, S, D) (S = 0 for the prefill). Outputs: `last_logits` (B, V) and
 * `present_key.i` / `present_value.i` (B, Hkv, S + T, D).
 */
export function buildDecodeStepGraph(config: ModelConfig, weights: ModelWeights, options: DecoderBuildOptions = {}): Graph {
  const g = new Graph();
  const ids = g.input(IO.inputIds, 'int64', ['B', 'T']); // (B, T)
  const mask = g.input(IO.attentionMask, 'int64', ['B', 'T']); // (B, T)
  const pastMask = g.input(STEP_IO.pastMask, 'int64', ['B', 'S']); // (B, S)
  const past: KvCache[] = [];
  for (let i = 0; i < config.numLayers; i++) {
    past.push({
      k: g.input(STEP_IO.pastKey(i), 'float32', ['B', config.numKvHeads, 'S', config.headDim]), // (B, Hkv, S, D)
      v: g.input(STEP_IO.pastValue(i), 'float32', ['B', config.numKvHeads, 'S', config.headDim]), // (B, Hkv, S, D)
    });
  }
  const params = declareDecoderParams(g, config, weights, options);
  const { bias, positions } = attentionBiasAndPositions(g, mask, pastMask); // (B, 1, 1, T, S+T), (B, T)
  const step = decoderForward(g, params, embedTokens(g, params, ids), positions, bias, past); // (B, T, H)
  const last: Tensor = g.gather(step.hidden, g.scalar(-1, 'int64'), 1); // (B, H)
  g.output(STEP_IO.lastLogits, lmHeadLogits(g, params, last)); // (B, V)
  step.present.forEach((c, i) => {
    g.output(STEP_IO.presentKey(i), c.k);
    g.output(STEP_IO.presentValue(i), c.v);
  });
  return g;
}

/**
 * Greedy decoding with a per-token JavaScript loop over the step graph: every
 * token is one `run()` that sends the whole KV cache in and gets it back.
 * Exists to be measured against the in-graph Loop (and to cross-check it).
 */
export class JsLoopGreedyDecoder {
  readonly config: ModelConfig;
  readonly #session: GraphSession;

  private constructor(config: ModelConfig, session: GraphSession) {
    this.config = config;
    this.#session = session;
  }

  static async create(config: ModelConfig, weights: ModelWeights, options: DecoderBuildOptions & { session?: SessionConfig } = {}): Promise<JsLoopGreedyDecoder> {
    const { session, ...graphOptions } = options;
    const graph = buildDecodeStepGraph(config, weights, graphOptions);
    return new JsLoopGreedyDecoder(config, await createSession(graph.toModel(), { mode: 'direct', ...session }));
  }

  /** `maxNewTokens` greedy tokens per prompt (no stop tokens). */
  async generate(prompts: readonly (readonly number[])[], maxNewTokens: number): Promise<number[][]> {
    const { numLayers, numKvHeads, headDim, vocabSize: V } = this.config;
    const B = prompts.length;
    const batch = leftPad(prompts, this.config.padTokenId);
    let feeds: Record<string, TensorData> = {
      [IO.inputIds]: batch.ids,
      [IO.attentionMask]: batch.mask,
      [STEP_IO.pastMask]: tensor('int64', [B, 0], new BigInt64Array(0)),
    };
    for (let i = 0; i < numLayers; i++) {
      feeds[STEP_IO.pastKey(i)] = tensor('float32', [B, numKvHeads, 0, headDim], new Float32Array(0));
      feeds[STEP_IO.pastValue(i)] = tensor('float32', [B, numKvHeads, 0, headDim], new Float32Array(0));
    }
    let pastMask = batch.mask.data as BigInt64Array;
    let width = batch.width;
    const out: number[][] = prompts.map(() => []);
    for (let step = 0; step < maxNewTokens; step++) {
      const result = await this.#session.run(feeds);
      const logits = result[STEP_IO.lastLogits]?.data as Float32Array;
      const next = new BigInt64Array(B);
      for (let b = 0; b < B; b++) {
        let best = 0;
        for (let v = 1; v < V; v++) if ((logits[b * V + v] as number) > (logits[b * V + best] as number)) best = v;
        next[b] = BigInt(best);
        out[b]?.push(best);
      }
      const previousMask = pastMask;
      const previousWidth = width;
      if (step > 0) {
        // The previous step's single token joins the past mask.
        pastMask = new BigInt64Array(B * (previousWidth + 1));
        for (let b = 0; b < B; b++) {
          pastMask.set(previousMask.subarray(b * previousWidth, (b + 1) * previousWidth), b * (previousWidth + 1));
          pastMask[b * (previousWidth + 1) + previousWidth] = 1n;
        }
        width = previousWidth + 1;
      }
      feeds = {
        [IO.inputIds]: tensor('int64', [B, 1], next),
        [IO.attentionMask]: tensor('int64', [B, 1], new BigInt64Array(B).fill(1n)),
        [STEP_IO.pastMask]: tensor('int64', [B, width], pastMask),
      };
      for (let i = 0; i < numLayers; i++) {
        feeds[STEP_IO.pastKey(i)] = result[STEP_IO.presentKey(i)] as TensorData;
        feeds[STEP_IO.pastValue(i)] = result[STEP_IO.presentValue(i)] as TensorData;
      }
    }
    return out;
  }

  async close(): Promise<void> {
    await this.#session.close();
  }
}
