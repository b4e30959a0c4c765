import { tensor, type TensorData } from '@sqlenv/onnx-graph';
import { AppError, ErrorCode, maxOf } from '@sqlenv/shared';
import type { ModelConfig } from '../io/config.ts';
import { GEN_IO } from '../graphs/generation-graph.ts';
import { copiedSlots, copyCompactSlots, copyRowLayer, extractRowCache, kvBytesPerToken, type BatchRowSlot, type RowKvCache } from './kv-cache.ts';

/**
 * A decode batch's KV cache kept in place between runs: the past feeds of the
 * next decode chunk, with room for the slots the chunks add.
 *
 * Without it, every run's cache was copied whole at least once in JavaScript:
 * the run's added slots appended to its past (`appendAlong`: a new array per
 * layer), and again into a new batch whenever a row left or joined, which under
 * continuous batching is nearly every chunk. Here the batch is one array per
 * layer and kind, (rows, Hkv, capacity, D), and a run copies only what changed:
 *
 *   row b:  [ its real slots 0 … length_b ) [ masked room … capacity )
 *   a run   feeds all `capacity` slots (the room is masked: softmax weight exactly 0)
 *   after   its added real slots are written at length_b (mask 1 there)
 *   a row   that leaves: the last row is moved into its place (one row copied)
 *   a row   that joins: its cache is copied into a new last row
 *
 * Row b's slots start at slot 0 and have no holes; positions come from the
 * count of real slots (cumsum(mask) − 1), so where the room sits changes no
 * token. When a run's slots do not fit, the capacity grows to the longest row
 * plus `marginSlots` (every row copied once); when rows leave and the capacity
 * exceeds the longest row by more than twice the margin, it shrinks the same
 * way, so the masked room a run computes stays under about two margins.
 */
export class ResidentBatch {
  readonly #config: ModelConfig;
  readonly #marginSlots: number;
  #capRows = 0;
  #capSlots = 0;
  #keys: Float32Array[] = [];
  #values: Float32Array[] = [];
  #mask = new BigInt64Array(0);
  /** Row b of the batch. */
  #rows: ResidentRow[] = [];
  /** Row copies into or inside the batch, and capacity changes (each copies every row): what `hold` and `append` cost. */
  readonly counters = { rowsCopiedIn: 0, rowsMoved: 0, reshapes: 0 };

  constructor(config: ModelConfig, marginSlots: number) {
    if (!Number.isInteger(marginSlots) || marginSlots < 1) throw new AppError(ErrorCode.VALIDATION, `marginSlots must be an integer ≥ 1, got ${marginSlots}`);
    this.#config = config;
    this.#marginSlots = marginSlots;
  }

  get rowCount(): number {
    return this.#rows.length;
  }

  get layerCount(): number {
    return this.#config.numLayers;
  }

  /** Slots per row a run feeds (real and masked room). */
  get capacity(): number {
    return this.#capSlots;
  }

  /** Bytes of the arrays held. */
  get sizeBytes(): number {
    return this.#capRows * this.#capSlots * kvBytesPerToken(this.#config);
  }

  /** The row at batch index `b`. */
  row(b: number): ResidentRow {
    const row = this.#rows[b];
    if (row === undefined) throw new AppError(ErrorCode.INTERNAL, `resident batch has no row ${b}`);
    return row;
  }

  /**
   * Make the batch hold exactly these caches, one row each, and return their rows (in the order
   * given; `row.index` is each one's place in the batch). A cache that is already a row of this
   * batch stays where it is, unless a row that leaves makes room for it; rows not in `caches` leave
   * (and cannot be read any more); any other cache is copied in. Undefined means an empty cache.
   */
  hold(caches: readonly (RowKvCache | undefined)[]): ResidentRow[] {
    const staying = new Set<ResidentRow>();
    for (const c of caches) {
      if (!(c instanceof ResidentRow && c.batch === this && c.alive)) continue;
      if (staying.has(c)) throw new AppError(ErrorCode.INTERNAL, 'a resident row cannot be held twice in one batch');
      staying.add(c);
    }
    for (const row of this.#rows) if (!staying.has(row)) row.leave();
    // Rows 0 … n-1 stay dense: a staying row keeps its index when it is below n, the others move into the holes.
    const n = staying.size;
    const placed = new Array<ResidentRow | undefined>(n).fill(undefined);
    const movers: ResidentRow[] = [];
    for (const row of staying) {
      if (row.index < n) placed[row.index] = row;
      else movers.push(row);
    }
    let hole = 0;
    for (const row of movers) {
      while (placed[hole] !== undefined) hole++;
      this.#moveRow(row.index, hole, row.length);
      row.index = hole;
      placed[hole] = row;
      this.counters.rowsMoved++;
    }
    this.#rows = placed as ResidentRow[];
    // Joining rows are copied into new last rows, after making room for them.
    const joining = caches.filter((c) => !(c instanceof ResidentRow && staying.has(c)));
    const longest = maxOf([...this.#rows.map((r) => r.length), ...joining.map((c) => c?.length ?? 0)], 0);
    const rows = this.#rows.length + joining.length;
    if (rows > this.#capRows || longest > this.#capSlots || this.#capSlots > longest + 2 * this.#marginSlots) {
      this.#reshape(Math.max(rows, this.#capRows), longest + this.#marginSlots);
    }
    return caches.map((c) => {
      if (c instanceof ResidentRow && staying.has(c)) return c;
      const row = new ResidentRow(this, this.#rows.length, c?.length ?? 0);
      this.#rows.push(row);
      this.#copyIn(row.index, c);
      this.counters.rowsCopiedIn++;
      return row;
    });
  }

  /** The past feeds of a run over exactly this batch's rows, in order: views of the arrays held, no copy. */
  feeds(): Record<string, TensorData> {
    const { numLayers, numKvHeads: Hkv, headDim: D } = this.#config;
    const B = this.#rows.length;
    const S = this.#capSlots;
    if (B === 0) throw new AppError(ErrorCode.INTERNAL, 'a resident batch without rows has no feeds');
    const feeds: Record<string, TensorData> = { [GEN_IO.pastMask]: tensor('int64', [B, S], this.#mask.subarray(0, B * S)) };
    const n = B * Hkv * S * D;
    for (let layer = 0; layer < numLayers; layer++) {
      feeds[GEN_IO.pastKey(layer)] = tensor('float32', [B, Hkv, S, D], (this.#keys[layer] as Float32Array).subarray(0, n));
      feeds[GEN_IO.pastValue(layer)] = tensor('float32', [B, Hkv, S, D], (this.#values[layer] as Float32Array).subarray(0, n));
    }
    return feeds;
  }

  /**
   * After a run fed by `feeds()`: write each row's added real slots (the present outputs' slots
   * with mask 1, in order) after its own, growing the capacity first when they do not fit.
   */
  append(outputs: Record<string, TensorData>): void {
    const { numLayers, numKvHeads: Hkv, headDim: D } = this.#config;
    const B = (outputs[GEN_IO.presentMask] as TensorData).dims[0] as number;
    if (B !== this.#rows.length) throw new AppError(ErrorCode.INTERNAL, `a run of ${B} rows cannot append to a resident batch of ${this.#rows.length}`);
    // Each row of the outputs as a view: its real added slots, copied after the row's own.
    const added = this.#rows.map((_, b) => extractRowCache(this.#config, outputs, b));
    const longest = maxOf(
      this.#rows.map((r, b) => r.length + (added[b] as RowKvCache).length),
      0,
    );
    if (longest > this.#capSlots) this.#reshape(this.#capRows, longest + this.#marginSlots);
    const S = this.#capSlots;
    for (let layer = 0; layer < numLayers; layer++) {
      for (const which of ['key', 'value'] as const) {
        const data = (which === 'key' ? this.#keys : this.#values)[layer] as Float32Array;
        this.#rows.forEach((row, b) => copyRowLayer(added[b] as RowKvCache, which, layer, Hkv, D, { data, base: b * Hkv * S * D, width: S, pad: row.length }));
      }
    }
    this.#rows.forEach((row, b) => {
      const n = (added[b] as RowKvCache).length;
      this.#mask.fill(1n, b * S + row.length, b * S + row.length + n);
      row.length += n;
    });
  }

  /** Let go of every row and array (the rows cannot be read any more). */
  clear(): void {
    for (const row of this.#rows) row.leave();
    this.#rows = [];
    this.#keys = [];
    this.#values = [];
    this.#mask = new BigInt64Array(0);
    this.#capRows = this.#capSlots = 0;
  }

  /** Copy the first `length` slots of row `b`, one layer's keys or values, into `out` (or a compact array). */
  copyLayer(b: number, name: 'key' | 'value', layer: number, length: number, out?: BatchRowSlot): Float32Array {
    const { numKvHeads: Hkv, headDim: D } = this.#config;
    const S = this.#capSlots;
    const src = ((name === 'key' ? this.#keys : this.#values)[layer] as Float32Array).subarray(b * Hkv * S * D, (b + 1) * Hkv * S * D);
    return copyCompactSlots(src, S, length, Hkv, D, out);
  }

  /** New arrays of `rows` × `slots`, every row's real slots copied over (layer by layer, so the old arrays go as the new come). */
  #reshape(rows: number, slots: number): void {
    const { numLayers, numKvHeads: Hkv, headDim: D } = this.#config;
    const S = Math.max(1, slots);
    if (rows === this.#capRows && S === this.#capSlots) return;
    this.counters.reshapes++;
    const mask = new BigInt64Array(rows * S);
    this.#rows.forEach((row, b) => mask.fill(1n, b * S, b * S + row.length));
    const move = (arrays: Float32Array[]): void => {
      for (let layer = 0; layer < numLayers; layer++) {
        const old = arrays[layer];
        const next = new Float32Array(rows * Hkv * S * D);
        if (old !== undefined) {
          if (S === this.#capSlots) next.set(old.subarray(0, this.#rows.length * Hkv * S * D));
          else this.#rows.forEach((row, b) => copyCompactSlots(old.subarray(b * Hkv * this.#capSlots * D), this.#capSlots, row.length, Hkv, D, { data: next, base: b * Hkv * S * D, width: S, pad: 0 }));
        }
        arrays[layer] = next;
      }
    };
    move(this.#keys);
    move(this.#values);
    this.#mask = mask;
    this.#capRows = rows;
    this.#capSlots = S;
  }

  /** Row `from`'s first `length` slots to row `to` (whose slots are free), with its mask. */
  #moveRow(from: number, to: number, length: number): void {
    const { numLayers, numKvHeads: Hkv, headDim: D } = this.#config;
    const S = this.#capSlots;
    for (const arrays of [this.#keys, this.#values]) {
      for (let layer = 0; layer < numLayers; layer++) {
        const data = arrays[layer] as Float32Array;
        for (let h = 0; h < Hkv; h++) data.copyWithin(((to * Hkv + h) * S) * D, ((from * Hkv + h) * S) * D, ((from * Hkv + h) * S + length) * D);
      }
    }
    this.#mask.fill(0n, to * S, (to + 1) * S).fill(1n, to * S, to * S + length);
    this.#mask.fill(0n, from * S, (from + 1) * S);
  }

  /** A cache's slots into row `b` (masked after them). */
  #copyIn(b: number, cache: RowKvCache | undefined): void {
    const { numLayers, numKvHeads: Hkv, headDim: D } = this.#config;
    const S = this.#capSlots;
    const length = cache?.length ?? 0;
    this.#mask.fill(0n, b * S, (b + 1) * S).fill(1n, b * S, b * S + length);
    if (cache === undefined || length === 0) return;
    for (let layer = 0; layer < numLayers; layer++) {
      for (const which of ['key', 'value'] as const) {
        copyRowLayer(cache, which, layer, Hkv, D, { data: (which === 'key' ? this.#keys : this.#values)[layer] as Float32Array, base: b * Hkv * S * D, width: S, pad: 0 });
      }
    }
  }
}

/**
 * One row of a `ResidentBatch`: a cache that lives in the batch's arrays. Reading `keys` / `values`,
 * or `slots`, copies its slots out; once the row leaves the batch it cannot be read.
 */
export class ResidentRow implements RowKvCache {
  readonly batch: ResidentBatch;
  /** Its place in the batch. */
  index: number;
  /** Real slots held. */
  length: number;
  #alive = true;

  constructor(batch: ResidentBatch, index: number, length: number) {
    this.batch = batch;
    this.index = index;
    this.length = length;
  }

  get alive(): boolean {
    return this.#alive;
  }

  leave(): void {
    this.#alive = false;
  }

  get keys(): Float32Array[] {
    return Array.from({ length: this.batch.layerCount }, (_, layer) => this.copyLayer('key', layer, this.length));
  }

  get values(): Float32Array[] {
    return Array.from({ length: this.batch.layerCount }, (_, layer) => this.copyLayer('value', layer, this.length));
  }

  copyLayer(name: 'key' | 'value', layer: number, length: number, out?: BatchRowSlot): Float32Array {
    if (!this.#alive) throw new AppError(ErrorCode.INTERNAL, 'this row has left its resident batch: its cache is gone');
    return this.batch.copyLayer(this.index, name, layer, length, out);
  }

  /** Its first `length` slots as a compact cache of its own. */
  slots(length: number): RowKvCache {
    return copiedSlots(this, this.batch.layerCount, length);
  }
}

/**
 * The resident batch a run's rows are, when they are exactly its rows in its order (each input's
 * cache the batch's row at that index): then its `feeds()` are the past and `append` takes the run's
 * outputs. Undefined otherwise.
 */
export function residentBatchOf(caches: readonly (RowKvCache | undefined)[]): ResidentBatch | undefined {
  const first = caches[0];
  if (!(first instanceof ResidentRow) || !first.alive) return undefined;
  const batch = first.batch;
  if (caches.length !== batch.rowCount) return undefined;
  return caches.every((c, b) => c instanceof ResidentRow && c.batch === batch && c.alive && c.index === b) ? batch : undefined;
}
