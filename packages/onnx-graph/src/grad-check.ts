import { gradients } from './autodiff.ts';
import type { Tensor } from './graph-core.ts';
import { Graph } from './graph.ts';
import type { GradInput } from './grad-cases.ts';
import { createSession } from './runtime/session.ts';
import type { SessionConfig } from './runtime/session-config.ts';
import { formatShape, graphError, isStaticShape } from './shape.ts';
import { elementCount, tensor, toNumbers, type TensorData } from './tensor-data.ts';

/**
 * Gradient checking by central finite differences (as in torch.autograd.gradcheck):
 * loss = Σ out ⊙ P for a fixed random projection P, so every output element matters;
 * analytic gradients come from the emitted backward graph, numeric ones from
 * (loss(x + h·e_j) − loss(x − h·e_j)) / 2h, one element at a time.
 */
export interface GradCheckResult {
  /** Per float input: analytic gradient values. */
  analytic: number[][];
  /** Per float input: finite-difference values (when requested). */
  numeric: number[][];
  /** Op types of the forward graph (to assert the case exercises the op under test). */
  forwardOps: string[];
}

export interface GradCheckOptions {
  dtype: 'float32' | 'float64';
  /** Float input values, one array per float input (see `sampleInputs`). */
  values: readonly number[][];
  /** Projection values for the output (length = output size). */
  projection: readonly number[];
  /** Compute finite differences too (float64 only makes sense). */
  numeric: boolean;
  /** Finite-difference step (default 1e-6). */
  stepSize?: number;
  /** Session settings (default: direct mode, nothing else). */
  session?: SessionConfig;
}

/** Random values for each float input, per its init kind, from `next` (uniform in [0, 1)). */
export function sampleInputs(inputs: readonly GradInput[], next: () => number): number[][] {
  const normal = (): number => Math.sqrt(-2 * Math.log(Math.max(next(), 1e-12))) * Math.cos(2 * Math.PI * next());
  return inputs
    .filter((s) => !('ints' in s) && !('bools' in s))
    .map((s) => {
      const init = 'init' in s ? s.init : 'normal';
      return Array.from({ length: elementCount(s.shape) }, () => {
        const v = normal();
        // Rounded to float32 so float32 and float64 runs see identical inputs.
        if (init === 'positive') return Math.fround(0.5 + 1.5 * next());
        if (init === 'nonzero') return Math.fround(Math.sign(v || 1) * (0.3 + Math.abs(v)));
        return Math.fround(v);
      });
    });
}

export async function gradCheck(build: (g: Graph, x: readonly Tensor[]) => Tensor, inputs: readonly GradInput[], options: GradCheckOptions): Promise<GradCheckResult> {
  const { dtype } = options;
  const g = new Graph();
  const floats: Tensor[] = [];
  const xs = inputs.map((s, i) => {
    if ('ints' in s) return g.constant(tensor('int64', s.shape, s.ints));
    if ('bools' in s) return g.constant(tensor('bool', s.shape, s.bools));
    const t = g.input(`x${i}`, dtype, s.shape);
    floats.push(t);
    return t;
  });
  const out = build(g, xs);
  if (!isStaticShape(out.shape)) throw graphError(`gradCheck: expected a static output shape, got ${formatShape(out.shape)}`);
  const forwardOps = g.nodes.map((n) => n.opType);
  const proj = g.constant(tensor(out.dtype, out.shape, options.projection.slice(0, elementCount(out.shape))));
  const loss = g.reduceSum(g.mul(out, proj));
  g.output('loss', loss);
  gradients(loss, floats).forEach((d, i) => g.output(`grad_${i}`, d));

  const session = await createSession(g.toModel(), { mode: 'direct', ...options.session });
  try {
    const feedsFor = (values: readonly number[][]): Record<string, TensorData> =>
      Object.fromEntries(floats.map((t, i) => [t.name, tensor(dtype, t.shape as number[], values[i] ?? [])]));
    const result = await session.run(feedsFor(options.values));
    const analytic = floats.map((_, i) => toNumbers(result[`grad_${i}`] as TensorData));
    const numeric: number[][] = [];
    if (options.numeric) {
      const h = options.stepSize ?? 1e-6;
      const lossAt = async (values: number[][]): Promise<number> => toNumbers((await session.run(feedsFor(values), { outputs: ['loss'] })).loss as TensorData)[0] ?? NaN;
      for (let i = 0; i < floats.length; i++) {
        const grad: number[] = [];
        const base = options.values.map((v) => [...v]);
        const xi = base[i] ?? [];
        for (let j = 0; j < xi.length; j++) {
          const x0 = xi[j] ?? 0;
          xi[j] = x0 + h;
          const plus = await lossAt(base);
          xi[j] = x0 - h;
          const minus = await lossAt(base);
          xi[j] = x0;
          grad.push((plus - minus) / (2 * h));
        }
        numeric.push(grad);
      }
    }
    return { analytic, numeric, forwardOps };
  } finally {
    await session.close();
  }
}

/** ‖a − b‖₂ / max(‖a‖₂, ‖b‖₂): the relative error gradcheck reports (0 when both are zero). */
export function relativeError(a: readonly number[], b: readonly number[]): number {
  let diff = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const x = a[i] ?? NaN;
    const y = b[i] ?? NaN;
    diff += (x - y) ** 2;
    na += x * x;
    nb += y * y;
  }
  const scale = Math.sqrt(Math.max(na, nb));
  return scale === 0 ? Math.sqrt(diff) : Math.sqrt(diff) / scale;
}
