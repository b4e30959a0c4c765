import { tensor, type TensorData } from '@sqlenv/onnx-graph';
import { AppError, ErrorCode, maxOf, Xoshiro128 } from '@sqlenv/shared';
import type { LoraWeights } from '../graphs/lora.ts';

/**
 * Host-side batching helpers: left padding, per-row uniforms, LoRA feeds.
 * Left padding keeps every row's last prompt token in the last column, so the
 * prefill's final position is where generation starts for every row; the
 * graphs compute positions as cumsum(mask) − 1, so padding shifts nothing.
 */
export interface PaddedBatch {
  ids: TensorData; // (B, P) int64
  mask: TensorData; // (B, P) int64
  /** Padding added in front of each row. */
  padLengths: number[];
  width: number;
}

export function leftPad(rows: readonly (readonly number[])[], padId: number, width?: number): PaddedBatch {
  if (rows.length === 0) throw new AppError(ErrorCode.VALIDATION, 'a batch needs at least one sequence');
  const longest = maxOf(rows.map((r) => r.length));
  if (longest === 0) throw new AppError(ErrorCode.VALIDATION, 'sequences must not be empty');
  const P = Math.max(longest, width ?? 0);
  const ids = new BigInt64Array(rows.length * P);
  const mask = new BigInt64Array(rows.length * P);
  const padLengths = rows.map((row, b) => {
    const pad = P - row.length;
    for (let t = 0; t < P; t++) {
      ids[b * P + t] = BigInt(t < pad ? padId : (row[t - pad] as number));
      mask[b * P + t] = t < pad ? 0n : 1n;
    }
    return pad;
  });
  return { ids: tensor('int64', [rows.length, P], ids), mask: tensor('int64', [rows.length, P], mask), padLengths, width: P };
}

/**
 * One row's uniforms for `steps` tokens from its seed. Quantised to 24 bits
 * so the float32 value is exact and strictly below 1.
 */
export function uniformsForSeed(seed: number, steps: number): Float32Array {
  const rng = new Xoshiro128(seed);
  const out = new Float32Array(steps);
  for (let i = 0; i < steps; i++) out[i] = (rng.nextUint32() >>> 8) / 16_777_216;
  return out;
}

/** LoRA tensors as feeds, in the graph's input shapes. */
export function loraFeeds(specs: readonly { name: string; shape: readonly number[] }[], weights: LoraWeights): Record<string, TensorData> {
  const feeds: Record<string, TensorData> = {};
  for (const spec of specs) {
    const values = weights.get(spec.name);
    if (values === undefined) throw new AppError(ErrorCode.MODEL, `missing LoRA tensor ${spec.name}`);
    feeds[spec.name] = tensor('float32', spec.shape, values);
  }
  return feeds;
}
