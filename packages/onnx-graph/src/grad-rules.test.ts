import { describe, expect, it } from 'vitest';
import { GRAD_CASES } from './grad-cases.ts';
import { gradCheck, relativeError, sampleInputs } from './grad-check.ts';
import { GRAD_RULES } from './grad-rules.ts';
import { OP_GRADIENT, type DifferentiableOp } from './ops.ts';
import { gradients } from './autodiff.ts';
import { Graph } from './graph.ts';
import { tensor } from './tensor-data.ts';
import { boxMullerNormals, mulberry32 } from '@sqlenv/shared';

const cases = (Object.keys(GRAD_CASES) as DifferentiableOp[]).flatMap((op) => GRAD_CASES[op].map((c, i) => ({ op, c, seed: 1000 + i + op.length * 31 })));

describe('gradient rule table', () => {
  it('has a rule and at least one check case for every differentiable op', () => {
    const differentiable = Object.entries(OP_GRADIENT).filter(([, kind]) => kind === 'differentiable').map(([op]) => op).sort();
    expect(Object.keys(GRAD_RULES).sort()).toEqual(differentiable);
    for (const op of differentiable) expect(GRAD_CASES[op as DifferentiableOp].length).toBeGreaterThan(0);
  });
});

describe('every gradient rule matches central finite differences (float64)', () => {
  it.each(cases.map((k) => [`${k.op}: ${k.c.name}`, k] as const))('%s', async (_name, { op, c, seed }) => {
    const next = mulberry32(seed);
    const values = sampleInputs(c.inputs, next);
    const result = await gradCheck(c.build, c.inputs, { dtype: 'float64', values, projection: boxMullerNormals(next, 256), numeric: true });
    expect(result.forwardOps).toContain(op);
    expect(result.analytic.length).toBeGreaterThan(0);
    result.analytic.forEach((analytic, i) => {
      const numeric = result.numeric[i] ?? [];
      // A case whose numeric gradient is all zero would check nothing.
      expect(Math.max(...numeric.map(Math.abs))).toBeGreaterThan(1e-3);
      expect(relativeError(analytic, numeric)).toBeLessThanOrEqual(1e-6);
    });
  });
});

describe('float32 gradients agree with float64 on the same graphs', () => {
  it.each(cases.map((k) => [`${k.op}: ${k.c.name}`, k] as const))('%s', async (_name, { c, seed }) => {
    const next = mulberry32(seed);
    const values = sampleInputs(c.inputs, next);
    const projection = boxMullerNormals(next, 256).map(Math.fround);
    const f64 = await gradCheck(c.build, c.inputs, { dtype: 'float64', values, projection, numeric: false });
    const f32 = await gradCheck(c.build, c.inputs, { dtype: 'float32', values, projection, numeric: false });
    f64.analytic.forEach((a, i) => expect(relativeError(f32.analytic[i] ?? [], a)).toBeLessThanOrEqual(1e-5));
  });
});

describe('backward graphs have no dead nodes', () => {
  // Differentiate w.r.t. each float input alone: a rule that builds a gradient it then
  // drops (for an input that needs none) leaves a node whose outputs nobody reads.
  it.each(cases.map((k) => [`${k.op}: ${k.c.name}`, k] as const))('%s', (_name, { c }) => {
    const floats = c.inputs.flatMap((s, i) => ('ints' in s || 'bools' in s ? [] : [i]));
    for (const only of floats) {
      const g = new Graph();
      const xs = c.inputs.map((s, i) =>
        'ints' in s ? g.constant(tensor('int64', s.shape, s.ints)) : 'bools' in s ? g.constant(tensor('bool', s.shape, s.bools)) : g.input(`x${i}`, 'float64', s.shape),
      );
      const loss = g.reduceSum(c.build(g, xs));
      const before = g.nodes.length;
      const [grad] = gradients(loss, [xs[only]!]);
      g.output('grad', grad!);
      const read = new Set(g.nodes.flatMap((n) => n.inputs.map((t) => t?.id)));
      const dead = g.nodes.slice(before).filter((n) => !n.outputs.some((o) => read.has(o.id) || g.outputs.includes(o)));
      expect(dead.map((n) => n.name)).toEqual([]);
    }
  });
});
