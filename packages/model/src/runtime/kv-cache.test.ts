import { tensor, type TensorData } from '@sqlenv/onnx-graph';
import { describe, expect, it } from 'vitest';
import { GEN_IO } from '../graphs/generation-graph.ts';
import { appendAlong, assembleBatchCache, compactRowCache, extractRowCache, KvCacheStore, kvBytesPerToken, RowCacheView, truncateRowCache, type RowKvCache } from './kv-cache.ts';
import { presetConfig } from '../io/presets.ts';

const config = { ...presetConfig('tiny-llama'), numLayers: 2, numKvHeads: 2, headDim: 3 };
const { numKvHeads: Hkv, headDim: D } = config;

/** A row cache whose value at (layer, k|v, head, slot, d) encodes all five, so misplaced copies show. */
function rowCache(length: number, tag: number): RowKvCache {
  const fill = (layer: number, which: number): Float32Array =>
    Float32Array.from({ length: Hkv * length * D }, (_, i) => {
      const h = Math.floor(i / (length * D));
      const s = Math.floor(i / D) % length;
      return tag * 10_000 + layer * 1000 + which * 100 + h * 10 + s + (i % D) / 10;
    });
  return { length, keys: [fill(0, 0), fill(1, 0)], values: [fill(0, 1), fill(1, 1)] };
}

describe('host KV caches', () => {
  it('assembles rows left-padded and extracts each back, compacted over the holes a run leaves', () => {
    const rows = [rowCache(3, 1), undefined, rowCache(1, 3)];
    const feeds = assembleBatchCache(config, rows);
    expect(feeds[GEN_IO.pastMask]?.dims).toEqual([3, 3]);
    expect(Array.from(feeds[GEN_IO.pastMask]!.data as BigInt64Array, Number)).toEqual([1, 1, 1, 0, 0, 0, 0, 0, 1]);
    // A run appends slots: two new ones per row, the first masked for row 2 (left padding of its input).
    const S = 5;
    const outputs: Record<string, TensorData> = {};
    const newMask = [1, 1, 1, 1, 1, /**/ 0, 0, 0, 1, 1, /**/ 0, 0, 1, 0, 1];
    outputs[GEN_IO.presentMask] = tensor('int64', [3, S], newMask);
    for (let layer = 0; layer < 2; layer++) {
      for (const [past, present] of [
        [GEN_IO.pastKey(layer), GEN_IO.presentKey(layer)],
        [GEN_IO.pastValue(layer), GEN_IO.presentValue(layer)],
      ] as const) {
        const from = feeds[past]!.data as Float32Array;
        const data = new Float32Array(3 * Hkv * S * D).fill(-1);
        for (let bh = 0; bh < 3 * Hkv; bh++) {
          data.set(from.subarray(bh * 3 * D, (bh + 1) * 3 * D), bh * S * D);
          data.fill(bh + 0.5, (bh * S + 3) * D, (bh + 1) * S * D); // the new slots
        }
        outputs[present] = tensor('float32', [3, Hkv, S, D], data);
      }
    }
    const first = extractRowCache(config, outputs, 0);
    expect(first.length).toBe(5);
    expect(truncateRowCache(config, first, 3)).toEqual(rows[0]);
    const second = extractRowCache(config, outputs, 1);
    expect(second.length).toBe(2);
    expect(Array.from(second.keys[1]!.subarray(0, D))).toEqual([2.5, 2.5, 2.5]); // batch 1, head 0: bh = 2
    const third = extractRowCache(config, outputs, 2);
    expect(third.length).toBe(2);
    expect(truncateRowCache(config, third, 1)).toEqual(rows[2]);
  });

  it('gives a batch without any cache one masked slot, never an empty past (WebGPU crashes on a MatMul over an empty axis)', () => {
    const feeds = assembleBatchCache(config, [undefined, { length: 0, keys: [], values: [] }]);
    expect(feeds[GEN_IO.pastMask]?.dims).toEqual([2, 1]);
    expect(Array.from(feeds[GEN_IO.pastMask]!.data as BigInt64Array, Number)).toEqual([0, 0]);
    for (let layer = 0; layer < config.numLayers; layer++) {
      for (const name of [GEN_IO.pastKey(layer), GEN_IO.pastValue(layer)]) {
        expect(feeds[name]?.dims).toEqual([2, Hkv, 1, D]);
        expect((feeds[name]!.data as Float32Array).every((x) => x === 0)).toBe(true);
      }
    }
  });

  it('keeps a run\'s rows as views of its outputs: fed back uncopied to the same rows in order, copied once otherwise', () => {
    // Outputs of a run of two rows, S = 4: row 0 has a hole at slot 1, row 1 left padding at 0–1.
    const S = 4;
    const outputs: Record<string, TensorData> = { [GEN_IO.presentMask]: tensor('int64', [2, S], [1, 0, 1, 1, 0, 0, 1, 1]) };
    for (let layer = 0; layer < 2; layer++) {
      for (const [name, which] of [
        [GEN_IO.presentKey(layer), 0],
        [GEN_IO.presentValue(layer), 1],
      ] as const) {
        outputs[name] = tensor('float32', [2, Hkv, S, D], Float32Array.from({ length: 2 * Hkv * S * D }, (_, i) => layer * 1000 + which * 100 + i));
      }
    }
    const views = [extractRowCache(config, outputs, 0), extractRowCache(config, outputs, 1)];
    expect(views.map((v) => v.length)).toEqual([3, 2]);
    // The same rows in the same order: the outputs themselves, holes and all.
    const same = assembleBatchCache(config, views);
    expect(same[GEN_IO.pastKey(1)]).toBe(outputs[GEN_IO.presentKey(1)]);
    expect(same[GEN_IO.pastValue(0)]).toBe(outputs[GEN_IO.presentValue(0)]);
    expect(same[GEN_IO.pastMask]).toBe(outputs[GEN_IO.presentMask]);
    // Another order, or beside another row: copied from the views, equal to assembling their compact forms.
    const compacts = views.map((v) => ({ length: v.length, keys: v.keys.map((k) => k.slice()), values: v.values.map((x) => x.slice()) }));
    const fresh = [extractRowCache(config, outputs, 0), extractRowCache(config, outputs, 1)];
    for (const [mixed, plain] of [
      [[fresh[1], fresh[0]], [compacts[1], compacts[0]]],
      [[rowCache(5, 7), fresh[0], undefined], [rowCache(5, 7), compacts[0], undefined]],
    ] as const) {
      const got = assembleBatchCache(config, mixed);
      const want = assembleBatchCache(config, plain);
      expect(Object.keys(got).sort()).toEqual(Object.keys(want).sort());
      for (const name of Object.keys(want)) expect(got[name]).toEqual(want[name]);
    }
    // Row 0's compact keys: slots 0, 2, 3 of its first head, then of its second.
    const first = compacts[0] as RowKvCache;
    expect(Array.from((first.keys[0] as Float32Array).subarray(0, 3 * D))).toEqual([0, 1, 2, 6, 7, 8, 9, 10, 11]);
    // Truncating copies the first real slots; compacting lets go of the outputs.
    const view = fresh[0] as RowCacheView;
    expect(truncateRowCache(config, view, 2)).toEqual(truncateRowCache(config, first, 2));
    expect(view.source).toBe(outputs);
    const compact = compactRowCache(view);
    expect(compact).not.toBeInstanceOf(RowCacheView);
    expect(compact).toEqual(first);
    expect(view.source).toBeUndefined();
    // Once compacted, a view no longer counts as its run's row.
    expect(assembleBatchCache(config, fresh)[GEN_IO.pastKey(0)]).not.toBe(outputs[GEN_IO.presentKey(0)]);
  });

  it('keeps parked caches by key, least recently parked evicted first, counting their bytes', () => {
    const store = new KvCacheStore(config);
    store.park('a', { ids: [1, 2], cache: rowCache(2, 1) });
    store.park('b', { ids: [3], cache: rowCache(1, 2) });
    store.park('a', { ids: [1, 2, 3, 4], cache: rowCache(4, 1) }); // re-parked: now the newest
    expect(store.sizeBytes).toBe(5 * kvBytesPerToken(config));
    expect(store.evictOldest()).toBe(true);
    expect(store.take('b')).toBeUndefined();
    expect(store.take('a')?.ids).toEqual([1, 2, 3, 4]);
    expect(store.sizeBytes).toBe(0);
    expect(store.evictOldest()).toBe(false);
  });

  it('keeps shared prefixes beside the episode caches: the longest common start wins, one LRU order over both', () => {
    const store = new KvCacheStore(config);
    store.parkPrefix({ ids: [1, 2, 3, 4], cache: rowCache(4, 1) });
    store.park('a', { ids: [9], cache: rowCache(1, 2) });
    store.parkPrefix({ ids: [1, 2, 5], cache: rowCache(3, 3) });
    expect(store.size).toBe(1);
    expect(store.prefixCount).toBe(2);
    expect(store.sizeBytes).toBe(8 * kvBytesPerToken(config));
    expect(store.longestPrefix([7, 1], 5)).toBeUndefined();
    const hit = store.longestPrefix([1, 2, 3, 4, 8], 5);
    expect(hit?.length).toBe(4);
    expect(hit?.cache).toEqual(rowCache(4, 1));
    // At most `limit` tokens of it.
    expect(store.longestPrefix([1, 2, 3, 4], 3)?.length).toBe(3);
    // [1, 2, 3, 4] was used last: the episode cache goes first, then [1, 2, 5].
    expect(store.evictOldest()).toBe(true);
    expect(store.size).toBe(0);
    expect(store.evictOldest()).toBe(true);
    expect(store.longestPrefix([1, 2, 5], 3)?.length).toBe(2);
    expect(store.sizeBytes).toBe(4 * kvBytesPerToken(config));
    store.clear();
    expect([store.prefixCount, store.sizeBytes, store.evictOldest()]).toEqual([0, 0, false]);
  });
});

describe('appendAlong: the cache after a run from the past and the slots the run added', () => {
  it('puts each row and head\'s added slots right after its past slots', () => {
    // (B 2, Hkv 2, S 2, D 1) past and (2, 2, 3, 1) added: value = 100·b + 10·h + slot (added slots 2, 3, 4).
    const past = tensor('float32', [2, 2, 2, 1], Array.from({ length: 8 }, (_, i) => 100 * Math.floor(i / 4) + 10 * (Math.floor(i / 2) % 2) + (i % 2)));
    const added = tensor('float32', [2, 2, 3, 1], Array.from({ length: 12 }, (_, i) => 100 * Math.floor(i / 6) + 10 * (Math.floor(i / 3) % 2) + 2 + (i % 3)));
    const all = appendAlong(past, added, 2);
    expect(all.dims).toEqual([2, 2, 5, 1]);
    expect(Array.from(all.data as Float32Array)).toEqual([0, 1, 2, 3, 4, 10, 11, 12, 13, 14, 100, 101, 102, 103, 104, 110, 111, 112, 113, 114]);
    const mask = appendAlong(tensor('int64', [2, 2], [0n, 1n, 1n, 1n]), tensor('int64', [2, 3], [1n, 1n, 1n, 0n, 1n, 1n]), 1);
    expect(mask.dims).toEqual([2, 5]);
    expect(Array.from(mask.data as BigInt64Array)).toEqual([0n, 1n, 1n, 1n, 1n, 1n, 1n, 0n, 1n, 1n]);
  });

  it('an empty past gives the added slots as they are', () => {
    const added = tensor('float32', [1, 2, 2, 1], [1, 2, 3, 4]);
    expect(Array.from(appendAlong(tensor('float32', [1, 2, 0, 1], []), added, 2).data as Float32Array)).toEqual([1, 2, 3, 4]);
  });
});
