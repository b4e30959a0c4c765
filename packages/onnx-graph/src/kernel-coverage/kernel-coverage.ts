import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { AppError, ErrorCode, formatZodIssues, maxOf } from '@sqlenv/shared';
import type { DType } from '../dtype.ts';
import type { GraphCore, GraphNode, Tensor } from '../graph-core.ts';
import { OPSET } from '../ops.ts';

/**
 * Whether an execution provider has a kernel for every node of a graph, at the node's op version
 * and types. ONNX Runtime assigns a node to a provider only when the provider registered a kernel
 * for the op, for a version range that contains the op's version in force at the model's opset, and
 * for the node's types; otherwise the node silently runs on the CPU provider, with copies between
 * device and host around it (docs/operations.md, "GPU"). This checks that ahead of time, on any
 * machine, from a provider's published kernel table kept as data (cuda-kernels.json, sources named
 * inside). It complements the startup probe, which can only run where the GPU is.
 */
const KernelSchema = z.strictObject({
  since: z.number().int().positive(),
  /** Last op version of the range; null = open ("N+"). */
  until: z.number().int().positive().nullable(),
  /** Type constraint (or '=<type>' for a fixed type) of each input, in order. */
  inputs: z.array(z.string()),
  outputs: z.array(z.string()),
  types: z.record(z.string(), z.array(z.string())),
  /** Inputs past the last listed one repeat its constraint (Concat, Loop's carried values). */
  variadicInputs: z.boolean().optional(),
  variadicOutputs: z.boolean().optional(),
});

export const KernelTableSchema = z.strictObject({
  description: z.string(),
  provider: z.string(),
  domain: z.string(),
  opset: z.number().int().positive(),
  sources: z.record(z.string(), z.string()),
  ops: z.record(
    z.string(),
    z.strictObject({
      /** The op's version history in the ONNX standard. */
      versions: z.array(z.number().int().positive()).min(1),
      kernel: KernelSchema.nullable(),
      /** Why a node without a kernel is fine (e.g. folded when the graph loads). */
      loadTime: z.string().optional(),
    }),
  ),
});
export type KernelTable = z.infer<typeof KernelTableSchema>;

/** ONNX type names (as in the kernel tables) of the builder's dtypes. */
const ONNX_TYPE: Record<DType, string> = { float32: 'float', float64: 'double', float16: 'float16', int64: 'int64', int32: 'int32', bool: 'bool' };

export interface UncoveredNode {
  opType: string;
  name: string;
  /** Where the node sits: 'main', or the path through Loop/If bodies ('main/Loop_12.body'). */
  graph: string;
  reason: string;
}

export interface KernelCoverage {
  provider: string;
  /** Nodes walked, subgraphs included. */
  nodes: number;
  /** Nodes per op type. */
  ops: Record<string, number>;
  uncovered: UncoveredNode[];
}

/** The CUDA provider's table for the pinned onnxruntime-node (cuda-kernels.json, validated). */
export function loadCudaKernelTable(): KernelTable {
  const raw: unknown = JSON.parse(readFileSync(new URL('./cuda-kernels.json', import.meta.url), 'utf8'));
  const parsed = KernelTableSchema.safeParse(raw);
  if (!parsed.success) throw new AppError(ErrorCode.VALIDATION, `cuda-kernels.json: ${formatZodIssues(parsed.error)}`);
  return parsed.data;
}

/** The op version in force at `opset`: the newest version of its history not above it. */
export function opVersionAt(versions: readonly number[], opset: number): number | undefined {
  const older = versions.filter((v) => v <= opset);
  return older.length === 0 ? undefined : maxOf(older);
}

/** Walk every node of `graph` (Loop and If bodies included) and list those the provider cannot run. */
export function kernelCoverage(graph: GraphCore, table: KernelTable, opset: number = OPSET): KernelCoverage {
  const coverage: KernelCoverage = { provider: table.provider, nodes: 0, ops: {}, uncovered: [] };
  const walk = (g: GraphCore, path: string): void => {
    for (const node of g.nodes) {
      coverage.nodes += 1;
      coverage.ops[node.opType] = (coverage.ops[node.opType] ?? 0) + 1;
      const reason = uncoveredReason(node, table, opset);
      if (reason !== undefined) coverage.uncovered.push({ opType: node.opType, name: node.name, graph: path, reason });
      for (const [attrName, value] of Object.entries(node.attrs)) if (value.kind === 'graph') walk(value.value, `${path}/${node.name}.${attrName}`);
    }
  };
  walk(graph, 'main');
  return coverage;
}

function uncoveredReason(node: GraphNode, table: KernelTable, opset: number): string | undefined {
  const entry = table.ops[node.opType];
  if (!entry) return `${node.opType} is not in the ${table.provider} table (add it to cuda-kernels.json from the provider's kernel list)`;
  const version = opVersionAt(entry.versions, opset);
  if (version === undefined) return `${node.opType} does not exist at opset ${opset}`;
  const kernel = entry.kernel;
  if (kernel === null) return entry.loadTime === undefined ? `${table.provider} has no ${node.opType} kernel` : undefined;
  if (version < kernel.since || (kernel.until !== null && version > kernel.until)) {
    return `${table.provider} registers ${node.opType} for versions ${kernel.since}${kernel.until === null ? '+' : `..${kernel.until}`}, the node is version ${version} (opset ${opset})`;
  }
  const problems = [
    ...slots(node.inputs, kernel.inputs, kernel.variadicInputs === true, 'input'),
    ...slots(node.outputs, kernel.outputs, kernel.variadicOutputs === true, 'output'),
  ].flatMap(({ tensor, constraint, what }) => {
    const type = ONNX_TYPE[tensor.dtype];
    const allowed = constraint.startsWith('=') ? [constraint.slice(1)] : kernel.types[constraint];
    if (allowed === undefined) return [`${what} constraint ${constraint} missing from the table`];
    return allowed.includes(type) ? [] : [`${what} '${tensor.name}' is ${type}; ${constraint} allows ${allowed.join(', ')}`];
  });
  return problems.length === 0 ? undefined : `${table.provider} ${node.opType}-${version}: ${problems.join('; ')}`;
}

function slots(tensors: readonly (Tensor | null)[], constraints: readonly string[], variadic: boolean, kind: string): Array<{ tensor: Tensor; constraint: string; what: string }> {
  const out: Array<{ tensor: Tensor; constraint: string; what: string }> = [];
  tensors.forEach((tensor, i) => {
    if (tensor === null) return; // an omitted optional input
    const constraint = constraints[i] ?? (variadic ? constraints.at(-1) : undefined);
    if (constraint === undefined) out.push({ tensor, constraint: `(${kind} ${i} beyond the kernel's ${constraints.length})`, what: `${kind} ${i}` });
    else out.push({ tensor, constraint, what: `${kind} ${i}` });
  });
  return out;
}
