import { attr, type GraphCore, type Tensor } from './graph-core.ts';
import { formatShape, graphError, type Dim, type Shape } from './shape.ts';

/**
 * ONNX Loop and If, built with subgraphs that are Graphs themselves (they may read outer-scope tensors).
 * Generic over the graph class so this file needs only GraphCore: graph.ts imports it, not the reverse.
 */

export interface LoopCarriedSpec {
  /** Initial value (from this graph or an enclosing one). */
  init: Tensor;
  /**
   * The body's view of the value's shape; give a fresh symbol for dims that change
   * between iterations (a growing KV cache: `['B', 'H', 'past', 'D']`). Default: init's shape.
   */
  shape?: Shape;
}

export interface LoopBodyArgs {
  /** The iteration number, int64 scalar, from 0. */
  iter: Tensor;
  /** The condition coming in, bool scalar. */
  cond: Tensor;
  /** The loop-carried values of this iteration. */
  carried: Tensor[];
}

export interface LoopBodyResult {
  /** Continue? bool scalar (default: the incoming condition). */
  cond?: Tensor;
  /** The next values of the loop-carried state, same count and dtypes as `carried`. */
  carried: readonly Tensor[];
  /** Per-iteration values, stacked along a new first axis in the loop's `scans` outputs. */
  scans?: readonly Tensor[];
}

/** A Loop's inputs and body; `G` is the graph class the body is built with (Graph: `LoopSpec`). */
export interface LoopSpecOf<G extends GraphCore> {
  /** Maximum trip count: a number or an int64 scalar tensor. */
  maxTrips?: number | Tensor;
  /** Initial condition, bool scalar (default: none, loop runs `maxTrips` times unless the body stops it). */
  cond?: Tensor;
  carried: readonly (Tensor | LoopCarriedSpec)[];
  body: (body: G, args: LoopBodyArgs) => LoopBodyResult;
}

export interface LoopResult {
  /** Final values of the loop-carried state. */
  carried: Tensor[];
  /** Scan outputs, shape [trips, ...per-iteration shape]. */
  scans: Tensor[];
}

/**
 * ONNX Loop. The body is built with its own Graph; it can read any tensor of
 * the enclosing graph (outer scope) and returns the next loop-carried values, the
 * continue condition and per-iteration scan values.
 */
export function buildLoop<G extends GraphCore>(g: GraphCore, spec: LoopSpecOf<G>, newSubgraph: () => G): LoopResult {
  if (spec.maxTrips === undefined && spec.cond === undefined) throw graphError('Loop: expected maxTrips or cond (or both), got neither');
  const carried = spec.carried.map((c) => ('init' in c ? c : { init: c }));
  const body = newSubgraph();
  const iter = body.input(g.unusedName('loop_iter'), 'int64', []);
  const condIn = body.input(g.unusedName('loop_cond_in'), 'bool', []);
  const bodyCarried = carried.map((c, i) => {
    const shape = c.shape ?? c.init.shape;
    if (shape.length !== c.init.rank) throw graphError(`Loop: carried[${i}] shape must keep the init's rank: expected rank ${c.init.rank}, got ${formatShape(shape)}`);
    return body.input(g.unusedName(`loop_carried_${i}`), c.init.dtype, shape);
  });
  const result = spec.body(body, { iter, cond: condIn, carried: bodyCarried });
  if (result.carried.length !== carried.length) throw graphError(`Loop: body must return ${carried.length} carried values, got ${result.carried.length}`);
  const condOut = result.cond ?? condIn;
  if (condOut.dtype !== 'bool' || condOut.rank !== 0) throw graphError(`Loop: body cond must be a bool scalar, got ${condOut.toString()}`);
  body.output(g.unusedName('loop_cond_out'), condOut);
  result.carried.forEach((t, i) => {
    const declared = bodyCarried[i] as Tensor;
    if (t.dtype !== declared.dtype || t.rank !== declared.rank) throw graphError(`Loop: carried[${i}]: expected ${declared.dtype} of rank ${declared.rank}, got ${t.toString()}`);
    t.shape.forEach((d, a) => {
      const want = declared.shape[a];
      if (typeof d === 'number' && typeof want === 'number' && d !== want) throw graphError(`Loop: carried[${i}] axis ${a}: expected ${want}, got ${d}`);
    });
    body.output(g.unusedName(`loop_carried_out_${i}`), t);
  });
  const scans = result.scans ?? [];
  scans.forEach((t, i) => body.output(g.unusedName(`loop_scan_${i}`), t));
  const staticTrips = typeof spec.maxTrips === 'number' && spec.cond === undefined && result.cond === undefined;
  const trips: Dim = staticTrips ? (spec.maxTrips as number) : g.freshDim('trips');
  const outerDim = (d: Dim): Dim => (g.hasDim(d) ? d : g.freshDim('loop'));
  // A carried dim keeps its name only when init, body input and body output all agree on it.
  const carriedSpecs = carried.map((c, i) => ({
    dtype: c.init.dtype,
    shape: c.init.shape.map((d, a) => (d === bodyCarried[i]?.shape[a] && d === result.carried[i]?.shape[a] ? d : g.freshDim('loop'))),
  }));
  const scanSpecs = scans.map((t) => ({ dtype: t.dtype, shape: [trips, ...t.shape.map(outerDim)] }));
  const maxTrips = spec.maxTrips === undefined ? null : typeof spec.maxTrips === 'number' ? g.scalar(spec.maxTrips, 'int64') : spec.maxTrips;
  if (maxTrips && (maxTrips.dtype !== 'int64' || maxTrips.rank > 1)) throw graphError(`Loop: maxTrips must be an int64 scalar, got ${maxTrips.toString()}`);
  if (spec.cond && (spec.cond.dtype !== 'bool' || spec.cond.rank > 1)) throw graphError(`Loop: cond must be a bool scalar, got ${spec.cond.toString()}`);
  const outs = g.addNode('Loop', [maxTrips, spec.cond ?? null, ...carried.map((c) => c.init)], { body: attr.graph(body) }, [...carriedSpecs, ...scanSpecs]);
  return { carried: outs.slice(0, carried.length), scans: outs.slice(carried.length) };
}

/** ONNX If: both branches are built with their own Graph and return the same number of outputs and dtypes. */
export function buildIf<G extends GraphCore>(g: GraphCore, cond: Tensor, thenBranch: (b: G) => readonly Tensor[], elseBranch: (b: G) => readonly Tensor[], newSubgraph: () => G): Tensor[] {
  if (cond.dtype !== 'bool' || cond.rank > 1) throw graphError(`If: cond must be a bool scalar, got ${cond.toString()}`);
  const build = (fn: (b: G) => readonly Tensor[], label: string): { g: G; outs: readonly Tensor[] } => {
    const g = newSubgraph();
    const outs = fn(g);
    outs.forEach((t, i) => g.output(g.unusedName(`if_${label}_${i}`), t));
    return { g, outs };
  };
  const a = build(thenBranch, 'then');
  const b = build(elseBranch, 'else');
  if (a.outs.length !== b.outs.length) throw graphError(`If: branches must return the same number of outputs: expected ${a.outs.length} (then), got ${b.outs.length} (else)`);
  const specs = a.outs.map((t, i) => {
    const u = b.outs[i] as Tensor;
    if (t.dtype !== u.dtype || t.rank !== u.rank) throw graphError(`If: output ${i}: expected ${t.dtype} of rank ${t.rank} (then), got ${u.toString()} (else)`);
    return { dtype: t.dtype, shape: t.shape.map((d, k) => (d === u.shape[k] && g.hasDim(d) ? d : g.freshDim('if'))) };
  });
  return g.addNode('If', [cond], { then_branch: attr.graph(a.g), else_branch: attr.graph(b.g) }, specs);
}
