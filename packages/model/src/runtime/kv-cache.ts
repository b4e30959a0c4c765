import { elementCount, tensor, type TensorData } from '@sqlenv/onnx-graph';
import { AppError, ErrorCode, maxOf } from '@sqlenv/shared';
import type { ModelConfig } from '../io/config.ts';
import { GEN_IO } from '../graphs/generation-graph.ts';

/**
 * Host-side KV caches of single sequences, as slot ranges in shared arrays.
 *
 * Every row's cache is the same kind of thing: the real slots of one row of
 * per-layer (rows, Hkv, width, D) key and value arrays, in order. The arrays
 * are a run's present outputs (a row just run), the resident decode batch's
 * (resident-batch.ts), or the row's own compact arrays (rows 1, width = its
 * length: a parked cache or a shared prefix). Copying a cache anywhere is one
 * loop over its ranges (`copyLayer`).
 *
 * Compaction is exact: RoPE is already applied to the stored keys and
 * positions come from cumsum(mask) − 1, so dropping masked slots changes no
 * position, and a masked key adds exactly 0 to the softmax. A batch is
 * assembled by left-padding each row's cache to the longest (mask 0 in front),
 * like the prompts.
 */
export interface SlotArrays {
  /** Per layer, (rows, heads, width, headDim) float32. */
  keys: Float32Array[];
  values: Float32Array[];
  /** Slots per row. */
  width: number;
  /** Key-value heads (Hkv) and the head size (D). */
  heads: number;
  headDim: number;
}

/** Where a row's slots go in a (·, Hkv, width, D) batch feed: its row starts at `base`, its slots at `pad`. */
export interface BatchRowSlot {
  data: Float32Array;
  base: number;
  width: number;
  pad: number;
}

/** Arrays of a cache that can no longer be read (a row that left the resident batch). */
const RELEASED: SlotArrays = { keys: [], values: [], width: 0, heads: 0, headDim: 0 };

/**
 * The first `length` real slots of row `row` of (·, Hkv, width, D) `src`, found in `ranges` ([start, end) in
 * order), copied into a batch row (`out`) or a new compact (Hkv, length, D) array: the one copy loop of caches.
 */
export function copySlots(src: Float32Array, width: number, row: number, ranges: readonly (readonly [number, number])[], length: number, Hkv: number, D: number, out?: BatchRowSlot): Float32Array {
  const dst = out?.data ?? new Float32Array(Hkv * length * D);
  for (let h = 0; h < Hkv; h++) {
    let at = out === undefined ? h * length * D : out.base + (h * out.width + out.pad) * D;
    let left = length;
    for (const [s, e] of ranges) {
      if (left === 0) break;
      const n = Math.min(e - s, left);
      const from = ((row * Hkv + h) * width + s) * D;
      dst.set(src.subarray(from, from + n * D), at);
      at += n * D;
      left -= n;
    }
  }
  return dst;
}

/**
 * A row's KV cache: its real slots, `ranges` of row `row` of `arrays`. Whoever owns the arrays (a run's
 * outputs, the resident batch) may move the row or replace the arrays; reads always go through them.
 */
export class RowKvCache {
  arrays: SlotArrays;
  row: number;
  ranges: [number, number][];
  /** Real slots held. */
  length: number;
  /** Its arrays are its own compact ones (nothing else reads or moves them). */
  readonly #own: boolean;

  constructor(arrays: SlotArrays, row: number, ranges: [number, number][], own = false) {
    this.arrays = arrays;
    this.row = row;
    this.ranges = ranges;
    this.length = ranges.reduce((n, [s, e]) => n + e - s, 0);
    this.#own = own;
  }

  /** A cache of its own compact per-layer (Hkv, length, D) arrays. */
  static compact(config: Pick<ModelConfig, 'numKvHeads' | 'headDim'>, length: number, keys: Float32Array[], values: Float32Array[]): RowKvCache {
    return new RowKvCache({ keys, values, width: length, heads: config.numKvHeads, headDim: config.headDim }, 0, length === 0 ? [] : [[0, length]], true);
  }

  /** Row `b` of a run's present cache: its real slots (mask 1) in the outputs, not copied. */
  static ofOutputs(config: ModelConfig, outputs: Record<string, TensorData>, b: number): RowKvCache {
    const maskT = outputs[GEN_IO.presentMask] as TensorData;
    const S = maskT.dims[1] as number;
    const mask = (maskT.data as BigInt64Array).subarray(b * S, (b + 1) * S);
    // Runs of real slots: left padding of the cache and of the new tokens leaves holes.
    const ranges: [number, number][] = [];
    for (let s = 0; s < S; s++) {
      if (mask[s] === 0n) continue;
      const last = ranges[ranges.length - 1];
      if (last !== undefined && last[1] === s) last[1] = s + 1;
      else ranges.push([s, s + 1]);
    }
    const layer = (name: string): Float32Array => (outputs[name] as TensorData).data as Float32Array;
    const keys = Array.from({ length: config.numLayers }, (_, l) => layer(GEN_IO.presentKey(l)));
    const values = Array.from({ length: config.numLayers }, (_, l) => layer(GEN_IO.presentValue(l)));
    return new RowKvCache({ keys, values, width: S, heads: config.numKvHeads, headDim: config.headDim }, b, ranges);
  }

  /** Whether its arrays are its own compact ones (nothing else is kept alive through it, and no one else moves them). */
  get isCompact(): boolean {
    return this.#own;
  }

  /** Per layer, its (Hkv, length, D) keys: its own arrays when compact, else copied. */
  get keys(): Float32Array[] {
    return this.isCompact ? this.arrays.keys : this.#copyAll('key', this.length);
  }

  get values(): Float32Array[] {
    return this.isCompact ? this.arrays.values : this.#copyAll('value', this.length);
  }

  /** Copy the first `length` real slots of one layer's keys (or values) into `out`, or a compact (Hkv, length, D) array. */
  copyLayer(which: 'key' | 'value', layer: number, length: number, out?: BatchRowSlot): Float32Array {
    const a = this.arrays;
    if (a === RELEASED) throw new AppError(ErrorCode.INTERNAL, 'this row has left its resident batch: its cache is gone');
    return copySlots((which === 'key' ? a.keys : a.values)[layer] as Float32Array, a.width, this.row, this.ranges, length, a.heads, a.headDim, out);
  }

  /** Its first `length` slots (dropping what was fed after a row's last valid token) as a compact cache of its own; itself when it already is one. */
  truncate(length: number): RowKvCache {
    if (length >= this.length && this.isCompact) return this;
    const n = Math.min(length, this.length);
    const a = this.arrays;
    return RowKvCache.compact({ numKvHeads: a.heads, headDim: a.headDim }, n, this.#copyAll('key', n), this.#copyAll('value', n));
  }

  /** Let go of the arrays (their owner reuses them): any later read throws. */
  release(): void {
    if (this.#own) throw new AppError(ErrorCode.INTERNAL, 'a compact cache has no owner to release it');
    this.arrays = RELEASED;
    this.ranges = [];
  }

  #copyAll(which: 'key' | 'value', length: number): Float32Array[] {
    if (this.arrays === RELEASED) throw new AppError(ErrorCode.INTERNAL, 'this row has left its resident batch: its cache is gone');
    return Array.from({ length: this.arrays.keys.length }, (_, l) => this.copyLayer(which, l, length));
  }
}

/** Bytes one cached token takes: every layer's key and value, float32. */
export function kvBytesPerToken(config: ModelConfig): number {
  return config.numLayers * 2 * config.numKvHeads * config.headDim * 4;
}

/**
 * Past-cache feeds for a batch: each row's cache left-padded to the longest, (B, Hkv, S, D) per layer
 * and the (B, S) mask, every row's slots copied in.
 */
export function assembleBatchCache(config: ModelConfig, rows: readonly (RowKvCache | undefined)[]): Record<string, TensorData> {
  const { numLayers, numKvHeads: Hkv, headDim: D } = config;
  const B = rows.length;
  // At least one slot: a batch without any cache gets one masked slot (zero keys and values, softmax
  // weight exactly 0), because ONNX Runtime's WebGPU MatMul crashes the process on an empty inner
  // dimension (the past's probabilities times its values; ORT 1.30). Every row's tokens and
  // log-probs are the same as with no slot; the present cache drops it with the other masked slots.
  const S = Math.max(1, maxOf(rows.map((r) => r?.length ?? 0), 0));
  const mask = new BigInt64Array(B * S);
  rows.forEach((r, b) => mask.fill(1n, b * S + S - (r?.length ?? 0), (b + 1) * S));
  const feeds: Record<string, TensorData> = { [GEN_IO.pastMask]: tensor('int64', [B, S], mask) };
  for (let layer = 0; layer < numLayers; layer++) {
    for (const [name, which] of [
      [GEN_IO.pastKey(layer), 'key'],
      [GEN_IO.pastValue(layer), 'value'],
    ] as const) {
      const data = new Float32Array(B * Hkv * S * D);
      rows.forEach((r, b) => {
        if (r === undefined || r.length === 0) return;
        r.copyLayer(which, layer, r.length, { data, base: b * Hkv * S * D, width: S, pad: S - r.length });
      });
      feeds[name] = tensor('float32', [B, Hkv, S, D], data);
    }
  }
  return feeds;
}

/**
 * `added` appended to `past` along `axis` (all other dimensions equal): the cache after a run, from
 * the past as fed and the slots the run added — a layer's (B, Hkv, S, D) keys or values along axis 2,
 * the (B, S) mask along axis 1. The layout the graph used to return itself, built here so the run's
 * outputs never hold the whole cache.
 */
export function appendAlong<T extends TensorData>(past: T, added: T, axis: number): T {
  const outer = elementCount(past.dims.slice(0, axis));
  const a = elementCount(past.dims.slice(axis)); // elements of `past` per outer index
  const b = elementCount(added.dims.slice(axis));
  type Typed = Float32Array | BigInt64Array;
  const from = past.data as Typed;
  const extra = added.data as Typed;
  const out = new (from.constructor as new (n: number) => Typed)(outer * (a + b));
  for (let o = 0; o < outer; o++) {
    out.set(from.subarray(o * a, (o + 1) * a) as never, o * (a + b));
    out.set(extra.subarray(o * b, (o + 1) * b) as never, o * (a + b) + a);
  }
  const dims = past.dims.map((d, i) => (i === axis ? d + (added.dims[i] as number) : d));
  return tensor(past.dtype, dims, out as never) as T;
}

/** Length of the common prefix of two id sequences. */
export function commonPrefixLength(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}
