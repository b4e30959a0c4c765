import { describe, expect, it } from 'vitest';
import { buildTrainingGraph, PolicyLossConfigSchema } from '@sqlenv/grpo';
import { Graph, kernelCoverage, loadCudaKernelTable, OP_GRADIENT, OPSET, opVersionAt, tensor, type KernelTable } from '@sqlenv/onnx-graph';
import { buildDecodeStepGraph, buildGenerationGraph, buildScoringGraph, expectedTensorSpecs, parseLoraConfig, presetConfig, type ModelConfig, type ModelWeights } from '@sqlenv/model';

/**
 * Every node of the graphs the project runs on a GPU — generation (workers), scoring and training
 * (trainer) — must have a kernel in ONNX Runtime's CUDA execution provider at its op version and
 * types; a node without one silently runs on the CPU, with device↔host copies around it. Checked
 * here against the provider's published kernel table (cuda-kernels.json, in @sqlenv/onnx-graph) at
 * the model sizes the README names, on a machine without a GPU.
 */
const table = loadCudaKernelTable();

/**
 * Weights of a config's published shapes without the memory: every tensor is a view of one zeroed
 * buffer the size of the largest, which the OS maps lazily (nothing is ever written or read: the
 * graphs are built and walked, never serialised or run).
 */
function shapeOnlyWeights(config: ModelConfig): ModelWeights {
  const specs = expectedTensorSpecs(config);
  const largest = Math.max(...specs.map((s) => s.shape.reduce((a, b) => a * b, 1)));
  const buffer = new ArrayBuffer(largest * 4);
  return new Map(specs.map((s) => [s.name, { shape: s.shape, data: new Float32Array(buffer, 0, s.shape.reduce((a, b) => a * b, 1)) }]));
}

const lora = parseLoraConfig({ rank: 16, alpha: 32, targets: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] });

/** The trainer's graphs: GRPO with every loss term on (clip, truncated importance weights, k3 KL) and SFT. */
function trainingGraphs(config: ModelConfig, weights: ModelWeights): { policy: Graph; sft: Graph } {
  const loss = PolicyLossConfigSchema.parse({ klBeta: 0.04 });
  return {
    policy: buildTrainingGraph(config, weights, { lora, objective: 'policy', loss }).graph,
    sft: buildTrainingGraph(config, weights, { lora, objective: 'sft' }).graph,
  };
}

const MODELS = ['qwen3-0.6b', 'qwen2.5-0.5b', 'smollm2-135m'] as const;

describe("ONNX Runtime's CUDA provider runs every node of the project's graphs", () => {
  it('the kernel table covers every op the graph builder can emit, with a version history', () => {
    for (const op of Object.keys(OP_GRADIENT)) {
      expect(table.ops[op], op).toBeDefined();
      expect(opVersionAt(table.ops[op]?.versions ?? [], OPSET), op).toBeDefined();
    }
    expect(table.opset).toBe(OPSET);
  });

  for (const name of MODELS) {
    it(`${name}: generation (chunked and whole-prompt prefill), decode-step, scoring, GRPO and SFT training graphs`, () => {
      const config = presetConfig(name);
      const weights = shapeOnlyWeights(config);
      // Generation with its chunked prefill (the default; generation-graph.ts), with the whole prompt in one
      // pass, and the step graph with the cache as inputs and outputs.
      const graphs = {
        generation: buildGenerationGraph(config, weights, { lora }).graph,
        'generation, unchunked prefill': buildGenerationGraph(config, weights, { lora, prefillChunkTokens: Infinity }).graph,
        'decode step': buildDecodeStepGraph(config, weights, { lora }),
        scoring: buildScoringGraph(config, weights, { lora }).graph,
        training: trainingGraphs(config, weights).policy,
        sft: trainingGraphs(config, weights).sft,
      };
      for (const [kind, graph] of Object.entries(graphs)) {
        const coverage = kernelCoverage(graph, table);
        expect(coverage.nodes, kind).toBeGreaterThan(config.numLayers * 10);
        expect(coverage.uncovered.map((u) => `${u.graph} ${u.name}: ${u.reason}`), `${name} ${kind}`).toEqual([]);
      }
      // The generation graph's loops are walked into: one per layer over the prompt's chunks, then the
      // decode loop, whose body holds the decoder (7 linears a layer).
      const generation = kernelCoverage(graphs.generation, table);
      expect(generation.ops['Loop']).toBe(config.numLayers + 1);
      expect(generation.ops['Gemm'] ?? 0).toBeGreaterThanOrEqual(config.numLayers * 7);
    }, 120_000);
  }

  it('reports a node the provider has no kernel for, at its version or its types', () => {
    const g = new Graph();
    const x = g.input('x', 'float32', [4]);
    const flags = g.input('flags', 'bool', [4]);
    const other = g.input('other', 'bool', [4]);
    // Where over bool values: the CUDA kernel takes numeric and float values only.
    g.output('picked', g.where(g.greater(x, g.scalar(0)), flags, other));
    g.output('argmax', g.argMax(g.cast(x, 'int64'), 0));
    const coverage = kernelCoverage(g, table);
    expect(coverage.uncovered.map((u) => u.opType).sort()).toEqual(['ArgMax', 'Where']);
    expect(coverage.uncovered.find((u) => u.opType === 'Where')?.reason).toMatch(/Where-16: input 1 'flags' is bool; T allows .*float/);
    // An op whose only kernel range ends before the graph's op version.
    const narrowed: KernelTable = structuredClone(table);
    const reduceMax = narrowed.ops['ReduceMax']?.kernel;
    if (reduceMax) reduceMax.until = 12;
    const g2 = new Graph();
    g2.output('m', g2.reduceMax(g2.input('y', 'float32', [2, 3]), [1]));
    expect(kernelCoverage(g2, narrowed).uncovered[0]?.reason).toMatch(/registers ReduceMax for versions 1\.\.12, the node is version 13 \(opset 17\)/);
    expect(tensor('float32', [1], [1]).dims).toEqual([1]);
  });
});
