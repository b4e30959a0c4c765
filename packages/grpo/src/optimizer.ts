import { AppError, ErrorCode } from '@sqlenv/shared';
import type { OptimizerConfig } from './config.ts';

/** Parameters (and gradients) by name; parameters are float32 master copies, updated in place. */
export type ParamMap = Map<string, Float32Array>;
export type GradMap = ReadonlyMap<string, Float32Array | Float64Array>;

/** What an optimizer carries from one step to the next: a checkpoint holds exactly this. */
export interface OptimizerState {
  /** Optimizer steps taken. */
  step: number;
  /** AdamW first and second moments by parameter name (empty for sgd). */
  m: Map<string, Float32Array>;
  v: Map<string, Float32Array>;
}

export interface StepReport {
  /** Global L2 norm of the gradients before clipping. */
  gradNorm: number;
  /** Learning rate this step used. */
  learningRate: number;
  /** Whether clipping scaled the gradients down. */
  clipped: boolean;
}

/**
 * Learning rate of optimizer step `step` (0-based: the number of steps taken before it), as
 * transformers' schedulers compute it: linear warm-up from 0 over `warmupSteps`, then constant, or a
 * half cosine from the peak down to minLrRatio × peak at `totalSteps`.
 */
export function learningRateAt(config: OptimizerConfig, step: number): number {
  const peak = config.learningRate;
  if (step < config.warmupSteps) return (peak * step) / Math.max(1, config.warmupSteps);
  if (config.schedule === 'constant') return peak;
  const total = config.totalSteps ?? step + 1;
  const progress = Math.min(1, (step - config.warmupSteps) / Math.max(1, total - config.warmupSteps));
  const cosine = 0.5 * (1 + Math.cos(Math.PI * progress));
  return peak * (config.minLrRatio + (1 - config.minLrRatio) * cosine);
}

/** Global L2 norm over all gradient tensors (summed in name order, so it is reproducible). */
export function globalNorm(grads: GradMap): number {
  let sum = 0;
  for (const name of [...grads.keys()].sort()) {
    const g = grads.get(name) as Float32Array | Float64Array;
    for (let i = 0; i < g.length; i++) sum += (g[i] as number) ** 2;
  }
  return Math.sqrt(sum);
}

/**
 * AdamW (Loshchilov & Hutter 2019) with PyTorch's arithmetic (torch.optim.AdamW, non-fused):
 * decoupled decay p ← p·(1 − lr·λ), moments m ← β1·m + (1 − β1)·g, v ← β2·v + (1 − β2)·g², then
 * p ← p − lr/(1 − β1ᵗ) · m / (√v/√(1 − β2ᵗ) + ε). Gradients are first clipped to a global norm as
 * torch.nn.utils.clip_grad_norm_ does (scale max/(norm + 1e-6) when below 1).
 *
 * sgd is plain gradient descent: p ← p − lr·g, nothing else (no momentum, decay or clipping), so a
 * step can be checked against any framework exactly.
 */
export class LoraOptimizer {
  readonly config: OptimizerConfig;
  #state: OptimizerState = { step: 0, m: new Map(), v: new Map() };

  constructor(config: OptimizerConfig) {
    this.config = config;
  }

  get step(): number {
    return this.#state.step;
  }

  /** One update of `params` in place from `grads` (same names and sizes). */
  apply(params: ParamMap, grads: GradMap): StepReport {
    for (const [name, p] of params) {
      const g = grads.get(name);
      if (g === undefined || g.length !== p.length) throw new AppError(ErrorCode.INTERNAL, `optimizer: gradient for ${name} is missing or has the wrong size`);
    }
    const gradNorm = globalNorm(grads);
    if (!Number.isFinite(gradNorm)) throw new AppError(ErrorCode.INTERNAL, `optimizer: the gradient norm is ${gradNorm} (NaN or infinite gradients); the update was not applied`);
    const lr = learningRateAt(this.config, this.#state.step);
    const t = this.#state.step + 1;
    let clipped = false;
    if (this.config.kind === 'sgd') {
      for (const [name, p] of params) {
        const g = grads.get(name) as Float32Array | Float64Array;
        for (let i = 0; i < p.length; i++) p[i] = (p[i] as number) - lr * (g[i] as number);
      }
    } else {
      const { beta1, beta2, epsilon, weightDecay, maxGradNorm } = this.config;
      const scale = maxGradNorm > 0 && gradNorm > maxGradNorm ? maxGradNorm / (gradNorm + 1e-6) : 1;
      clipped = scale < 1;
      const bias1 = 1 - beta1 ** t;
      const bias2Sqrt = Math.sqrt(1 - beta2 ** t);
      const stepSize = lr / bias1;
      for (const [name, p] of params) {
        const g = grads.get(name) as Float32Array | Float64Array;
        const m = this.#moment(this.#state.m, name, p.length);
        const v = this.#moment(this.#state.v, name, p.length);
        for (let i = 0; i < p.length; i++) {
          const gi = (g[i] as number) * scale;
          const pi = (p[i] as number) * (1 - lr * weightDecay);
          const mi = beta1 * (m[i] as number) + (1 - beta1) * gi;
          const vi = beta2 * (v[i] as number) + (1 - beta2) * gi * gi;
          m[i] = mi;
          v[i] = vi;
          p[i] = pi - (stepSize * (m[i] as number)) / (Math.sqrt(v[i] as number) / bias2Sqrt + epsilon);
        }
      }
    }
    this.#state.step = t;
    return { gradNorm, learningRate: lr, clipped };
  }

  /** A copy of the state (for a checkpoint). */
  state(): OptimizerState {
    const copy = (m: Map<string, Float32Array>): Map<string, Float32Array> => new Map([...m].map(([k, v]) => [k, Float32Array.from(v)]));
    return { step: this.#state.step, m: copy(this.#state.m), v: copy(this.#state.v) };
  }

  /** Continue from a saved state. */
  load(state: OptimizerState): void {
    this.#state = { step: state.step, m: new Map(state.m), v: new Map(state.v) };
  }

  #moment(map: Map<string, Float32Array>, name: string, size: number): Float32Array {
    let values = map.get(name);
    if (values === undefined) {
      values = new Float32Array(size);
      map.set(name, values);
    }
    return values;
  }
}
