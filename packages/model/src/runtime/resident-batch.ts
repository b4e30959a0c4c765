import { tensor, type TensorData } from '@sqlenv/onnx-graph';
import { AppError, ErrorCode, maxOf } from '@sqlenv/shared';
import type { ModelConfig } from '../io/config.ts';
import { GEN_IO } from '../graphs/generation-graph.ts';
import { copySlots, kvBytesPerToken, RowKvCache, type SlotArrays } from './kv-cache.ts';

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
  /** The arrays every row's cache reads: replaced in place (same object) when the capacity changes. */
  readonly #arrays: SlotArrays;
  #mask = new BigInt64Array(0);
  /** Row b of the batch: a cache whose `row` is b and whose one range is [0, length). */
  #rows: RowKvCache[] = [];
  /** Row copies into or inside the batch, and capacity changes (each copies every row): what `hold` and `append` cost. */
  readonly counters = { rowsCopiedIn: 0, rowsMoved: 0, reshapes: 0 };

  constructor(config: ModelConfig, marginSlots: number) {
    if (!Number.isInteger(marginSlots) || marginSlots < 1) throw new AppError(ErrorCode.VALIDATION, `marginSlots must be an integer ≥ 1, got ${marginSlots}`);
    this.#config = config;
    this.#marginSlots = marginSlots;
    this.#arrays = { keys: [], values: [], width: 0, heads: config.numKvHeads, headDim: config.headDim };
  }

  get rowCount(): number {
    return this.#rows.length;
  }

  /** Slots per row a run feeds (real and masked room). */
  get capacity(): number {
    return this.#arrays.width;
  }

  /** Bytes of the arrays held. */
  get sizeBytes(): number {
    return this.#capRows * this.#arrays.width * kvBytesPerToken(this.#config);
  }

  /** The row at batch index `b`. */
  row(b: number): RowKvCache {
    const row = this.#rows[b];
    if (row === undefined) throw new AppError(ErrorCode.INTERNAL, `resident batch has no row ${b}`);
    return row;
  }

  /** Whether `caches` are exactly this batch's rows, in its order: then `feeds()` is their past. */
  holdsExactly(caches: readonly (RowKvCache | undefined)[]): boolean {
    return caches.length === this.#rows.length && caches.every((c, b) => c === this.#rows[b]);
  }

  /**
   * Make the batch hold exactly these caches, one row each, and return their rows (in the order
   * given; `row.row` is each one's place in the batch). A cache that is already a row of this
   * batch stays where it is, unless a row that leaves makes room for it; rows not in `caches` leave
   * (and cannot be read any more); any other cache is copied in. Undefined means an empty cache.
   */
  hold(caches: readonly (RowKvCache | undefined)[]): RowKvCache[] {
    const staying = new Set<RowKvCache>();
    for (const c of caches) {
      if (c === undefined || !this.#isRow(c)) continue;
      if (staying.has(c)) throw new AppError(ErrorCode.INTERNAL, 'a resident row cannot be held twice in one batch');
      staying.add(c);
    }
    for (const row of this.#rows) if (!staying.has(row)) row.release();
    // Rows 0 … n-1 stay dense: a staying row keeps its index when it is below n, the others move into the holes.
    const n = staying.size;
    const placed = new Array<RowKvCache | undefined>(n).fill(undefined);
    const movers: RowKvCache[] = [];
    for (const row of staying) {
      if (row.row < n) placed[row.row] = row;
      else movers.push(row);
    }
    let hole = 0;
    for (const row of movers) {
      while (placed[hole] !== undefined) hole++;
      this.#moveRow(row.row, hole, row.length);
      row.row = hole;
      placed[hole] = row;
      this.counters.rowsMoved++;
    }
    this.#rows = placed as RowKvCache[];
    // Joining rows are copied into new last rows, after making room for them.
    const joining = caches.filter((c) => c === undefined || !staying.has(c));
    const longest = maxOf([...this.#rows.map((r) => r.length), ...joining.map((c) => c?.length ?? 0)], 0);
    const rows = this.#rows.length + joining.length;
    if (rows > this.#capRows || longest > this.capacity || this.capacity > longest + 2 * this.#marginSlots) {
      this.#reshape(Math.max(rows, this.#capRows), longest + this.#marginSlots);
    }
    return caches.map((c) => {
      if (c !== undefined && staying.has(c)) return c;
      const length = c?.length ?? 0;
      const row = new RowKvCache(this.#arrays, this.#rows.length, length === 0 ? [] : [[0, length]]);
      this.#copyIn(row.row, c);
      this.#rows.push(row);
      this.counters.rowsCopiedIn++;
      return row;
    });
  }

  /** The past feeds of a run over exactly this batch's rows, in order: views of the arrays held, no copy. */
  feeds(): Record<string, TensorData> {
    const { numLayers, numKvHeads: Hkv, headDim: D } = this.#config;
    const B = this.#rows.length;
    const S = this.capacity;
    if (B === 0) throw new AppError(ErrorCode.INTERNAL, 'a resident batch without rows has no feeds');
    const feeds: Record<string, TensorData> = { [GEN_IO.pastMask]: tensor('int64', [B, S], this.#mask.subarray(0, B * S)) };
    const n = B * Hkv * S * D;
    for (let layer = 0; layer < numLayers; layer++) {
      feeds[GEN_IO.pastKey(layer)] = tensor('float32', [B, Hkv, S, D], (this.#arrays.keys[layer] as Float32Array).subarray(0, n));
      feeds[GEN_IO.pastValue(layer)] = tensor('float32', [B, Hkv, S, D], (this.#arrays.values[layer] as Float32Array).subarray(0, n));
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
    // Each row of the outputs as a cache of its own: its real added slots, copied after the row's own.
    const added = this.#rows.map((_, b) => RowKvCache.ofOutputs(this.#config, outputs, b));
    const longest = maxOf(
      this.#rows.map((r, b) => r.length + (added[b] as RowKvCache).length),
      0,
    );
    if (longest > this.capacity) this.#reshape(this.#capRows, longest + this.#marginSlots);
    const S = this.capacity;
    for (let layer = 0; layer < numLayers; layer++) {
      for (const which of ['key', 'value'] as const) {
        const data = (which === 'key' ? this.#arrays.keys : this.#arrays.values)[layer] as Float32Array;
        this.#rows.forEach((row, b) => {
          const add = added[b] as RowKvCache;
          if (add.length > 0) add.copyLayer(which, layer, add.length, { data, base: b * Hkv * S * D, width: S, pad: row.length });
        });
      }
    }
    this.#rows.forEach((row, b) => {
      const n = (added[b] as RowKvCache).length;
      this.#mask.fill(1n, b * S + row.length, b * S + row.length + n);
      row.length += n;
      row.ranges = row.length === 0 ? [] : [[0, row.length]];
    });
  }

  /** Let go of every row and array (the rows cannot be read any more). */
  clear(): void {
    for (const row of this.#rows) row.release();
    this.#rows = [];
    this.#arrays.keys = [];
    this.#arrays.values = [];
    this.#arrays.width = 0;
    this.#mask = new BigInt64Array(0);
    this.#capRows = 0;
  }

  #isRow(c: RowKvCache): boolean {
    return c.arrays === this.#arrays && this.#rows[c.row] === c;
  }

  /** New arrays of `rows` × `slots`, every row's real slots copied over (layer by layer, so the old arrays go as the new come). */
  #reshape(rows: number, slots: number): void {
    const { numLayers, numKvHeads: Hkv, headDim: D } = this.#config;
    const S = Math.max(1, slots);
    const old = this.capacity;
    if (rows === this.#capRows && S === old) return;
    this.counters.reshapes++;
    const mask = new BigInt64Array(rows * S);
    this.#rows.forEach((row, b) => mask.fill(1n, b * S, b * S + row.length));
    const move = (arrays: Float32Array[]): void => {
      for (let layer = 0; layer < numLayers; layer++) {
        const from = arrays[layer];
        const next = new Float32Array(rows * Hkv * S * D);
        if (from !== undefined) {
          if (S === old) next.set(from.subarray(0, this.#rows.length * Hkv * S * D));
          else this.#rows.forEach((row, b) => copySlots(from, old, b, row.ranges, row.length, Hkv, D, { data: next, base: b * Hkv * S * D, width: S, pad: 0 }));
        }
        arrays[layer] = next;
      }
    };
    move(this.#arrays.keys);
    move(this.#arrays.values);
    this.#arrays.width = S;
    this.#mask = mask;
    this.#capRows = rows;
  }

  /** Row `from`'s first `length` slots to row `to` (whose slots are free), with its mask. */
  #moveRow(from: number, to: number, length: number): void {
    const { numLayers, numKvHeads: Hkv, headDim: D } = this.#config;
    const S = this.capacity;
    for (const arrays of [this.#arrays.keys, this.#arrays.values]) {
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
    const S = this.capacity;
    const length = cache?.length ?? 0;
    this.#mask.fill(0n, b * S, (b + 1) * S).fill(1n, b * S, b * S + length);
    if (cache === undefined || length === 0) return;
    for (let layer = 0; layer < numLayers; layer++) {
      for (const which of ['key', 'value'] as const) {
        cache.copyLayer(which, layer, length, { data: (which === 'key' ? this.#arrays.keys : this.#arrays.values)[layer] as Float32Array, base: b * Hkv * S * D, width: S, pad: 0 });
      }
    }
  }
}
