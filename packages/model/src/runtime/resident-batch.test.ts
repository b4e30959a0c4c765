import { tensor, type TensorData } from '@sqlenv/onnx-graph';
import { describe, expect, it } from 'vitest';
import { GEN_IO } from '../graphs/generation-graph.ts';
import { presetConfig } from '../io/presets.ts';
import { RowKvCache } from './kv-cache.ts';
import { ResidentBatch } from './resident-batch.ts';

const config = { ...presetConfig('tiny-llama'), numLayers: 2, numKvHeads: 2, headDim: 3 };
const { numKvHeads: Hkv, headDim: D } = config;

/** Value at (layer, k|v, head, slot, d) of a row tagged `tag`: every field shows in it, so a misplaced copy fails. */
const value = (tag: number, layer: number, which: number, h: number, s: number, d: number): number => tag * 10_000 + layer * 1000 + which * 100 + h * 10 + s + d / 10;

function rowCache(length: number, tag: number): RowKvCache {
  const fill = (layer: number, which: number): Float32Array => {
    const out = new Float32Array(Hkv * length * D);
    for (let h = 0; h < Hkv; h++) for (let s = 0; s < length; s++) for (let d = 0; d < D; d++) out[(h * length + s) * D + d] = value(tag, layer, which, h, s, d);
    return out;
  };
  return RowKvCache.compact(config, length, [fill(0, 0), fill(1, 0)], [fill(0, 1), fill(1, 1)]);
}

/** What a cache holds, compact: comparable whatever arrays it lives in. */
const plain = (c: RowKvCache | undefined): unknown => (c === undefined ? undefined : { length: c.length, keys: c.keys, values: c.values });

/** What the feeds say row b holds: its real slots, in order, as a compact cache (checks the mask marks slots 0 … length). */
function fedRow(feeds: Record<string, TensorData>, b: number): unknown {
  const maskT = feeds[GEN_IO.pastMask] as TensorData;
  const S = maskT.dims[1] as number;
  const mask = Array.from((maskT.data as BigInt64Array).subarray(b * S, (b + 1) * S), Number);
  const length = mask.indexOf(0) === -1 ? S : mask.indexOf(0);
  expect(mask.slice(length).every((m) => m === 0)).toBe(true);
  const take = (name: string): Float32Array => {
    const data = (feeds[name] as TensorData).data as Float32Array;
    const out = new Float32Array(Hkv * length * D);
    for (let h = 0; h < Hkv; h++) out.set(data.subarray(((b * Hkv + h) * S) * D, ((b * Hkv + h) * S + length) * D), h * length * D);
    return out;
  };
  return { length, keys: [take(GEN_IO.pastKey(0)), take(GEN_IO.pastKey(1))], values: [take(GEN_IO.pastValue(0)), take(GEN_IO.pastValue(1))] };
}

/** A run's present outputs adding `added[b]` real slots to row b (tagged 100 + b), after `holes[b]` masked ones, over A slots. */
function runOutputs(A: number, added: readonly number[], holes: readonly number[]): Record<string, TensorData> {
  const B = added.length;
  const mask = new BigInt64Array(B * A);
  const outputs: Record<string, TensorData> = {};
  added.forEach((n, b) => mask.fill(1n, b * A + (holes[b] as number), b * A + (holes[b] as number) + n));
  outputs[GEN_IO.presentMask] = tensor('int64', [B, A], mask);
  for (let layer = 0; layer < 2; layer++) {
    for (const [which, name] of [
      [0, GEN_IO.presentKey(layer)],
      [1, GEN_IO.presentValue(layer)],
    ] as const) {
      const data = new Float32Array(B * Hkv * A * D).fill(Number.NaN); // masked slots: never copied
      added.forEach((n, b) => {
        for (let h = 0; h < Hkv; h++) for (let i = 0; i < n; i++) for (let d = 0; d < D; d++) data[((b * Hkv + h) * A + (holes[b] as number) + i) * D + d] = value(100 + b, layer, which, h, i, d);
      });
      outputs[name] = tensor('float32', [B, Hkv, A, D], data);
    }
  }
  return outputs;
}

/** `cache` followed by the `n` slots a run added to row b (tagged 100 + b): what the row must hold after `append`. */
function extended(cache: RowKvCache, n: number, tag: number): RowKvCache {
  const add = rowCache(n, tag);
  const cat = (a: Float32Array, x: Float32Array): Float32Array => {
    const out = new Float32Array(Hkv * (cache.length + n) * D);
    for (let h = 0; h < Hkv; h++) {
      out.set(a.subarray(h * cache.length * D, (h + 1) * cache.length * D), h * (cache.length + n) * D);
      out.set(x.subarray(h * n * D, (h + 1) * n * D), (h * (cache.length + n) + cache.length) * D);
    }
    return out;
  };
  return RowKvCache.compact(config, cache.length + n, cache.keys.map((k, l) => cat(k, add.keys[l]!)), cache.values.map((v, l) => cat(v, add.values[l]!)));
}

describe('ResidentBatch: a decode batch kept in place between runs', () => {
  it('feeds its rows from slot 0 with masked room, writes a run’s real slots after each row, and grows only when they do not fit', () => {
    const batch = new ResidentBatch(config, 4);
    const caches = [rowCache(3, 1), rowCache(5, 2), rowCache(1, 3)];
    const rows = batch.hold(caches);
    expect(rows.map((r) => r.row)).toEqual([0, 1, 2]);
    expect(batch.capacity).toBe(5 + 4);
    expect(batch.holdsExactly(rows)).toBe(true);
    const feeds = batch.feeds();
    expect(feeds[GEN_IO.pastKey(0)]!.dims).toEqual([3, Hkv, 9, D]);
    caches.forEach((c, b) => expect(fedRow(feeds, b)).toEqual(plain(c)));
    // A decode chunk: 3 slots each, row 1's first one masked (left padding of its input).
    batch.append(runOutputs(3, [3, 2, 3], [0, 1, 0]));
    expect(rows.map((r) => r.length)).toEqual([6, 7, 4]);
    expect(batch.capacity).toBe(9); // 7 fits: no copy of the rows
    const want = [extended(caches[0]!, 3, 100), extended(caches[1]!, 2, 101), extended(caches[2]!, 3, 102)];
    want.forEach((w, b) => expect(fedRow(batch.feeds(), b)).toEqual(plain(w)));
    // Reading a row out copies its slots (parking a finished turn's cache), whatever its length: the arrays stay the batch's.
    expect(plain(rows[1]!.truncate(7))).toEqual(plain(want[1]));
    expect(rows[1]!.truncate(7)).not.toBe(rows[1]);
    expect(plain(rows[2]!.truncate(4))).toEqual(plain(want[2]));
    expect(plain(rows[0]!.truncate(4))).toEqual(plain(want[0]!.truncate(4)));
    // The next chunk does not fit in 9 slots: the arrays grow to the longest + the margin, every row kept.
    batch.append(runOutputs(3, [3, 3, 3], [0, 0, 0]));
    expect(batch.capacity).toBe(10 + 4);
    expect(batch.counters.reshapes).toBe(2);
    [extended(want[0]!, 3, 100), extended(want[1]!, 3, 101), extended(want[2]!, 3, 102)].forEach((w, b) => expect(fedRow(batch.feeds(), b)).toEqual(plain(w)));
  });

  it('a row that leaves is filled by the last one (one row moved), a joining cache is copied into a new last row, and a row that left cannot be read', () => {
    const batch = new ResidentBatch(config, 8);
    const caches = [rowCache(3, 1), rowCache(5, 2), rowCache(4, 3), rowCache(2, 4)];
    const [a, b, c, d] = batch.hold(caches) as [RowKvCache, RowKvCache, RowKvCache, RowKvCache];
    const joining = rowCache(6, 5);
    // b leaves; d takes its place; the joining cache is row 3.
    const held = batch.hold([a, c, d, joining]);
    expect(held.slice(0, 3)).toEqual([a, c, d]);
    expect([a.row, c.row, d.row, held[3]!.row]).toEqual([0, 2, 1, 3]);
    expect(batch.counters).toEqual({ rowsCopiedIn: 5, rowsMoved: 1, reshapes: 1 });
    expect(() => b.truncate(2)).toThrow(/left its resident batch/);
    const feeds = batch.feeds();
    expect(fedRow(feeds, 0)).toEqual(plain(caches[0]));
    expect(fedRow(feeds, 1)).toEqual(plain(caches[3]));
    expect(fedRow(feeds, 2)).toEqual(plain(caches[2]));
    expect(fedRow(feeds, 3)).toEqual(plain(joining));
    // A run over the rows in another order, or over some of them, is not the batch's: it is assembled (copied) instead.
    expect(batch.holdsExactly([a, c, d, held[3]])).toBe(false);
    expect(batch.holdsExactly([a, d, c])).toBe(false);
    expect(batch.holdsExactly([a, d, c, held[3]])).toBe(true);
  });

  it('a row as long as the capacity, alone in the batch, is still copied out when parked (its arrays stay the batch\'s)', () => {
    const batch = new ResidentBatch(config, 4);
    const [row] = batch.hold([rowCache(1, 1)]) as [RowKvCache];
    batch.append(runOutputs(4, [4], [0]));
    expect([row.length, batch.capacity]).toEqual([5, 5]);
    const parked = row.truncate(5);
    expect(parked).not.toBe(row);
    expect(parked.isCompact).toBe(true);
    batch.clear();
    expect(plain(parked)).toEqual(plain(extended(rowCache(1, 1), 4, 100)));
  });

  it('shrinks once the longest row is more than twice the margin below the capacity, and lets go of everything on clear', () => {
    const batch = new ResidentBatch(config, 2);
    const [short, long] = batch.hold([rowCache(2, 1), rowCache(12, 2)]) as [RowKvCache, RowKvCache];
    expect(batch.capacity).toBe(14);
    batch.hold([short]);
    expect(batch.capacity).toBe(4);
    expect(() => long.truncate(1)).toThrow(/left its resident batch/);
    expect(fedRow(batch.feeds(), 0)).toEqual(plain(rowCache(2, 1)));
    batch.clear();
    expect(batch.rowCount).toBe(0);
    expect(batch.sizeBytes).toBe(0);
    expect(() => short.truncate(1)).toThrow(/left its resident batch/);
    expect(() => batch.feeds()).toThrow(/without rows/);
  });
});
