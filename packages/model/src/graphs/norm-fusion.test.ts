import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as ort from 'onnxruntime-node';
import { decodeModel, encodeModel, type GraphProto } from '@sqlenv/onnx-graph';
import { presetConfig } from '../io/presets.ts';
import { randomWeights } from '../io/random-checkpoint.ts';
import { parseLoraConfig } from './lora.ts';
import { buildGenerationGraph } from './generation-graph.ts';

/** Op types of a graph and all its subgraphs, counted. */
function countOps(graph: GraphProto, into: Map<string, number> = new Map()): Map<string, number> {
  for (const node of graph.node) {
    into.set(node.opType, (into.get(node.opType) ?? 0) + 1);
    for (const a of node.attribute ?? []) if (a.type === 'graph') countOps(a.g, into);
  }
  return into;
}

describe('generation graph: RMSNorm as ONNX Runtime fuses it', () => {
  it('every norm of the decode loop becomes one SimplifiedLayerNormalization node in the optimized session', async () => {
    const config = presetConfig('tiny-qwen3');
    const { graph } = buildGenerationGraph(config, randomWeights(config, { seed: 3, initStd: 0.05 }), { lora: parseLoraConfig({ rank: 4 }) });
    const built = countOps(graph.toModel().proto.graph);
    // The decode loop's norms (the prefill keeps the x·x form): per layer input and post-attention norms, Qwen3's q and k norms, and the final norm.
    const norms = 4 * config.numLayers + 1;
    expect(built.get('Pow')).toBe(norms);
    const dir = mkdtempSync(join(tmpdir(), 'sqlenv-norm-fusion-'));
    try {
      const path = join(dir, 'optimized.onnx');
      const session = await ort.InferenceSession.create(encodeModel(graph.toModel().proto), { graphOptimizationLevel: 'all', optimizedModelFilePath: path, logSeverityLevel: 3 });
      await session.release();
      const optimized = countOps(decodeModel(readFileSync(path)).graph);
      expect((optimized.get('SimplifiedLayerNormalization') ?? 0) + (optimized.get('SkipSimplifiedLayerNormalization') ?? 0)).toBe(norms);
      expect(optimized.get('Pow') ?? 0).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
