import { tensor, type TensorData } from '@sqlenv/onnx-graph';
import { leftPad, type PaddedBatch } from '@sqlenv/model';
import { AppError, ErrorCode } from '@sqlenv/shared';
import type { LossNormalisation } from './config.ts';

/**
 * One sequence to learn from, token-aligned: entry t of every array belongs to token t
 * (`lossMask[t] = 1`: token t is a target, predicted from the tokens before it).
 */
export interface SequenceSample {
  inputIds: readonly number[];
  lossMask: readonly number[];
}

/** A sampled episode for the policy loss. */
export interface PolicySample extends SequenceSample {
  /** log π_behaviour(token t) as the worker recorded it (0 where the mask is 0). */
  behaviourLogprobs: readonly number[];
  /** The episode's advantage (from its group), the same for all its tokens. */
  advantage: number;
  /** Temperature the log-probs are taken at (the sampling temperature). */
  temperature: number;
  /**
   * Per token, how many updates the weights that sampled it are behind the learner's current ones
   * (0: sampled with the very weights the learner holds). Optional: it only splits the mismatch
   * figures (`MismatchReport.fresh`), the loss does not read it.
   */
  behaviourLag?: readonly number[];
}

/** Check one sample's arrays line up and hold what the graph can take. */
export function checkSample(sample: SequenceSample & Partial<Pick<PolicySample, 'behaviourLogprobs' | 'behaviourLag'>>, label: string): void {
  const n = sample.inputIds.length;
  if (n < 2) throw new AppError(ErrorCode.VALIDATION, `${label}: needs at least 2 tokens, got ${n}`);
  if (sample.lossMask.length !== n) throw new AppError(ErrorCode.VALIDATION, `${label}: loss_mask has ${sample.lossMask.length} entries for ${n} tokens`);
  if (sample.behaviourLogprobs !== undefined && sample.behaviourLogprobs.length !== n) {
    throw new AppError(ErrorCode.VALIDATION, `${label}: ${sample.behaviourLogprobs.length} log-probs for ${n} tokens`);
  }
  if (sample.behaviourLag !== undefined && sample.behaviourLag.length !== n) {
    throw new AppError(ErrorCode.VALIDATION, `${label}: ${sample.behaviourLag.length} behaviour lags for ${n} tokens`);
  }
  if (sample.lossMask[0] === 1) throw new AppError(ErrorCode.VALIDATION, `${label}: the first token cannot be a target (nothing predicts it)`);
}

/**
 * Per-token weights of every sample: the loss mask times the normalisation of the whole batch, so
 * that summing −w·ℓ over micro-batches gives the batch's loss exactly.
 * token: 1 / (loss tokens in the batch); sequence: 1 / (episodes × the episode's loss tokens);
 * dr_grpo: 1 / (episodes × maxCompletionTokens).
 */
export function tokenWeights(samples: readonly SequenceSample[], normalisation: LossNormalisation, maxCompletionTokens: number): number[][] {
  const counts = samples.map((s) => s.lossMask.reduce((a, m) => a + (m > 0 ? 1 : 0), 0));
  const total = counts.reduce((a, b) => a + b, 0);
  return samples.map((s, i) => {
    let weight: number;
    if (normalisation === 'token') weight = total === 0 ? 0 : 1 / total;
    else if (normalisation === 'sequence') weight = counts[i] === 0 ? 0 : 1 / (samples.length * (counts[i] as number));
    else weight = 1 / (samples.length * maxCompletionTokens);
    return s.lossMask.map((m) => (m > 0 ? weight : 0));
  });
}

/**
 * Split sample indices into micro-batches of at most `budgetTokens` padded tokens (rows × longest
 * row), longest first so rows of similar length share padding. Only samples with the same key (the
 * temperature: one scalar per run) share a micro-batch. A sample longer than the budget goes alone.
 */
export function planMicroBatches(lengths: readonly number[], budgetTokens: number, keys?: readonly number[]): number[][] {
  const order = lengths.map((_, i) => i).sort((a, b) => (keys?.[a] ?? 0) - (keys?.[b] ?? 0) || (lengths[b] as number) - (lengths[a] as number) || a - b);
  const batches: number[][] = [];
  let current: number[] = [];
  let width = 0;
  for (const i of order) {
    const len = lengths[i] as number;
    const sameKey = current.length === 0 || keys === undefined || keys[current[0] as number] === keys[i];
    const nextWidth = Math.max(width, len);
    if (current.length > 0 && (!sameKey || nextWidth * (current.length + 1) > budgetTokens)) {
      batches.push(current);
      current = [];
    }
    width = current.length === 0 ? len : Math.max(width, len);
    current.push(i);
  }
  if (current.length > 0) batches.push(current);
  return batches;
}

/**
 * One micro-batch, left-padded by the model package's `leftPad` (ids and attention mask), and the
 * per-token inputs laid out on the same padding: token t of row b sits at column pad_b + t.
 */
export class PaddedRows {
  readonly rows: readonly (readonly number[])[];
  /** The padded ids and attention mask, and each row's padding. */
  readonly batch: PaddedBatch;

  constructor(rows: readonly (readonly number[])[], padTokenId: number) {
    this.rows = rows;
    this.batch = leftPad(rows, padTokenId);
  }

  get width(): number {
    return this.batch.width;
  }

  /** A per-token float tensor from per-row arrays aligned with the rows' tokens (padding carries 0). */
  perToken(dtype: 'float32' | 'float64', values: readonly (readonly number[])[]): TensorData {
    const W = this.width;
    const out = dtype === 'float32' ? new Float32Array(this.rows.length * W) : new Float64Array(this.rows.length * W);
    this.rows.forEach((row, b) => {
      const pad = this.batch.padLengths[b] as number;
      const v = values[b] as readonly number[];
      for (let t = 0; t < row.length; t++) out[b * W + pad + t] = v[t] as number;
    });
    return dtype === 'float32' ? tensor('float32', [this.rows.length, W], out as Float32Array) : tensor('float64', [this.rows.length, W], out as Float64Array);
  }

  /** Row b's values (its real tokens only) from a (B, W) output. */
  unpad(data: Float32Array | Float64Array, b: number): number[] {
    const W = this.width;
    return Array.from(data.subarray(b * W + (this.batch.padLengths[b] as number), (b + 1) * W));
  }
}
