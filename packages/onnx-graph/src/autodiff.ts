import { isFloatDType } from './dtype.ts';
import type { GraphCore, GraphNode, Tensor } from './graph-core.ts';
import { Graph } from './graph.ts';
import { GRAD_RULES, type GradContext } from './grad-rules.ts';
import { OP_GRADIENT, isDifferentiableOp } from './ops.ts';
import { broadcastAxes, formatShape, graphError, sameShape } from './shape.ts';

export interface GradientsOptions {
  /** d(output)/d(loss) to start from, shaped like `loss` (default: 1 for a scalar loss). */
  seed?: Tensor;
}

/**
 * Reverse-mode autodiff over the graph (as in micrograd, but over graph nodes):
 * walk the nodes that lie between `wrt` and `loss` in reverse creation order
 * (creation order is a topological order), ask each node's rule for its input
 * gradients, undo broadcasting, and sum the contributions of tensors with several
 * consumers. The backward pass is added to the same graph as standard ONNX ops.
 * Returns one gradient per `wrt` tensor, shaped and typed like it (zeros when
 * `loss` does not depend on it).
 */
export function gradients(loss: Tensor, wrt: readonly Tensor[], options: GradientsOptions = {}): Tensor[] {
  const g = loss.graph;
  if (!(g instanceof Graph)) throw graphError(`gradients: loss ${loss.toString()} does not belong to a Graph builder`);
  if (!isFloatDType(loss.dtype)) throw graphError(`gradients: expected a float loss, got ${loss.toString()}`);
  for (const w of wrt) {
    if (w.graph !== g) throw graphError(`gradients: wrt ${w.toString()} must belong to the loss's graph`);
    if (!isFloatDType(w.dtype)) throw graphError(`gradients: expected float wrt tensors, got ${w.toString()}`);
  }
  const seed = options.seed ?? (loss.rank === 0 ? g.scalar(1, loss.dtype) : undefined);
  if (!seed) throw graphError(`gradients: expected a scalar loss (or a seed), got ${loss.toString()}`);
  if (seed.dtype !== loss.dtype || !sameShape(seed.shape, loss.shape)) throw graphError(`gradients: seed must match the loss: expected ${loss.dtype}${formatShape(loss.shape)}, got ${seed.toString()}`);

  // Snapshot: the backward nodes appended below must not be visited.
  const forward = [...g.nodes];
  const reached = reachableFrom(forward, wrt);
  const contributions = new Map<number, Tensor[]>([[loss.id, [seed]]]);
  const total = (t: Tensor): Tensor | null => {
    const parts = contributions.get(t.id);
    if (!parts || parts.length === 0) return null;
    // Several consumers: the gradients add up (multivariate chain rule).
    const sum = parts.reduce((a, b) => g.add(a, b));
    contributions.set(t.id, [sum]);
    return sum;
  };

  for (let n = forward.length - 1; n >= 0; n--) {
    const node = forward[n] as GraphNode;
    if (!node.outputs.some((o) => contributions.has(o.id))) continue;
    const region = g.checkpointNodes.get(node.id);
    if (region !== undefined) {
      recompute(g, region, total(node.outputs[0] as Tensor) as Tensor, reached, contributions);
      continue;
    }
    const needs = node.inputs.map((i) => i !== null && reached.has(i.id) && isFloatDType(i.dtype));
    const implicit = implicitInputs(node).some((t) => reached.has(t.id));
    if (!needs.some(Boolean) && !implicit) continue;
    const op = node.opType;
    if (OP_GRADIENT[op] === 'zero' || g.stopGradientNodes.has(node.id)) continue;
    if (!isDifferentiableOp(op) || implicit) {
      throw graphError(`gradients: op ${op} (node ${node.name}) has no gradient rule, but the loss depends on it through ${node.outputs.map((o) => o.toString()).join(', ')}`);
    }
    const dys = node.outputs.map(total);
    const first = node.outputs[0] as Tensor;
    const ctx: GradContext = { g, node, x: node.inputs, y: node.outputs, dy: dys[0] ?? g.zerosLike(first), dys, needs };
    const dxs = GRAD_RULES[op](ctx);
    node.inputs.forEach((input, i) => {
      const dx = dxs[i];
      if (!input || !needs[i] || !dx) return;
      const list = contributions.get(input.id) ?? [];
      list.push(unbroadcast(g, dx, input, op));
      contributions.set(input.id, list);
    });
  }
  return wrt.map((w) => total(w) ?? g.zerosLike(w));
}

/**
 * Gradient checkpointing (Chen et al. 2016, "Training deep nets with sublinear memory cost"): the
 * tensor `build()` returns, computed as usual in the forward pass, but `gradients()` does not keep the
 * tensors made inside `build` for the backward pass. It re-emits those nodes in the backward pass and
 * differentiates the copy, so only the region's inputs stay alive between the passes. `build` must
 * create its nodes in this graph and only its result may be used outside it.
 *
 * ONNX has no control edges, so two things keep ONNX Runtime from undoing the recomputation: each
 * region input the copy reads goes through Where(size(dy) ≥ 0, x, 0), a copy that cannot run before the
 * gradient reaching the region exists (so the copy runs in the backward pass, one region at a time),
 * and that differs from the forward's inputs (so common-subexpression elimination cannot merge the
 * copy back into the forward nodes).
 */
export function checkpoint(g: Graph, build: () => Tensor): Tensor {
  const first = g.nodes.length;
  const result = build();
  if (result.graph !== g) throw graphError(`checkpoint: the result ${result.toString()} must belong to the checkpoint's graph`);
  const [out] = g.addNode('Identity', [result], {}, [{ dtype: result.dtype, shape: result.shape }]);
  if (!out?.producer) throw graphError('checkpoint: Identity produced no output');
  g.checkpointNodes.set(out.producer.id, { nodes: g.nodes.slice(first, g.nodes.length - 1), output: result });
  return out;
}

/** The backward pass of a checkpoint: copy its region with gated inputs, differentiate the copy w.r.t. them. */
function recompute(g: Graph, region: { nodes: readonly GraphNode[]; output: Tensor }, dy: Tensor, reached: ReadonlySet<number>, contributions: Map<number, Tensor[]>): void {
  const inside = new Set(region.nodes.map((n) => n.id));
  const boundary = new Map<number, Tensor>();
  for (const n of region.nodes) for (const t of n.inputs) if (t && !(t.producer && inside.has(t.producer.id)) && reached.has(t.id) && isFloatDType(t.dtype)) boundary.set(t.id, t);
  if (boundary.size === 0) return;
  const ready = g.not(g.less(g.size(dy), 0)); // () bool, always true, known only once dy is
  const copies = new Map<number, Tensor>([...boundary.values()].map((t) => [t.id, g.where(ready, t, 0)]));
  const gated = [...copies.values()];
  for (const n of region.nodes) {
    if (n.inputs.length === 0) continue; // constants: shared with the forward
    const outs = g.addNode(n.opType, n.inputs.map((t) => (t ? (copies.get(t.id) ?? t) : null)), n.attrs, n.outputs.map((o) => ({ dtype: o.dtype, shape: o.shape })));
    if (g.stopGradientNodes.has(n.id)) g.stopGradientNodes.add((outs[0] as Tensor).producer?.id as number);
    n.outputs.forEach((o, k) => copies.set(o.id, outs[k] as Tensor));
  }
  const grads = gradients(copies.get(region.output.id) as Tensor, gated, { seed: dy });
  [...boundary.values()].forEach((t, i) => {
    const list = contributions.get(t.id) ?? [];
    list.push(grads[i] as Tensor);
    contributions.set(t.id, list);
  });
}

/**
 * Undo broadcasting, once for all rules: sum the gradient over the axes along which
 * the input was broadcast (leading axes and size-1 axes), then reshape to the input.
 */
function unbroadcast(g: Graph, grad: Tensor, input: Tensor, op: string): Tensor {
  if (grad.dtype !== input.dtype) throw graphError(`gradients: rule for ${op} returned ${grad.toString()} for input ${input.toString()} (dtype differs)`);
  if (sameShape(grad.shape, input.shape)) return grad;
  if (grad.rank < input.rank) throw graphError(`gradients: rule for ${op} returned ${grad.toString()}, expected a shape that broadcasts from ${formatShape(input.shape)}`);
  const axes = broadcastAxes(input.shape, grad.shape);
  const summed = axes.length > 0 ? g.reduceSum(grad, axes, { keepDims: true }) : grad;
  return sameShape(summed.shape, input.shape) ? summed : g.reshapeAs(summed, input);
}

/** Ids of tensors that depend on any of `sources` (the sources included). */
function reachableFrom(nodes: readonly GraphNode[], sources: readonly Tensor[]): Set<number> {
  const reached = new Set(sources.map((t) => t.id));
  for (const node of nodes) {
    const deps = [...node.inputs, ...implicitInputs(node)];
    if (deps.some((t) => t !== null && reached.has(t.id))) for (const o of node.outputs) reached.add(o.id);
  }
  return reached;
}

/** Outer-scope tensors a node's subgraphs (Loop/If bodies) read: dependencies not listed as inputs. */
function implicitInputs(node: GraphNode): Tensor[] {
  const out: Tensor[] = [];
  for (const a of Object.values(node.attrs)) if (a.kind === 'graph') collectCaptures(a.value, a.value, out);
  return out;
}

function collectCaptures(sub: GraphCore, top: GraphCore, out: Tensor[]): void {
  for (const n of sub.nodes) {
    for (const t of n.inputs) if (t && !isWithin(t.graph, top)) out.push(t);
    for (const a of Object.values(n.attrs)) if (a.kind === 'graph') collectCaptures(a.value, top, out);
  }
}

function isWithin(g: GraphCore, top: GraphCore): boolean {
  for (let c: GraphCore | undefined = g; c; c = c.parent) if (c === top) return true;
  return false;
}
