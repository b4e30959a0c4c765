import { tensor, type TensorData } from '@sqlenv/onnx-graph';
import { describe, expect, it } from 'vitest';
import { GEN_IO } from '../graphs/generation-graph.ts';
import { appendAlong, assembleBatchCache, kvBytesPerToken, RowKvCache } from './kv-cache.ts';
import { evictionsFor, KvStore } from './kv-store.ts';
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
  return RowKvCache.compact(config, length, [fill(0, 0), fill(1, 0)], [fill(0, 1), fill(1, 1)]);
}

/** What a cache holds, compact: comparable whatever arrays it lives in. */
const plain = (c: RowKvCache | undefined): unknown => (c === undefined ? undefined : { length: c.length, keys: c.keys, values: c.values });
const extractRowCache = (outputs: Record<string, TensorData>, b: number): RowKvCache => RowKvCache.ofOutputs(config, outputs, b);

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
    const first = extractRowCache(outputs, 0);
    expect(first.length).toBe(5);
    expect(plain(first.truncate(3))).toEqual(plain(rows[0]));
    const second = extractRowCache(outputs, 1);
    expect(second.length).toBe(2);
    expect(Array.from(second.keys[1]!.subarray(0, D))).toEqual([2.5, 2.5, 2.5]); // batch 1, head 0: bh = 2
    const third = extractRowCache(outputs, 2);
    expect(third.length).toBe(2);
    expect(plain(third.truncate(1))).toEqual(plain(rows[2]));
  });

  it('gives a batch without any cache one masked slot, never an empty past (WebGPU crashes on a MatMul over an empty axis)', () => {
    const feeds = assembleBatchCache(config, [undefined, RowKvCache.compact(config, 0, [], [])]);
    expect(feeds[GEN_IO.pastMask]?.dims).toEqual([2, 1]);
    expect(Array.from(feeds[GEN_IO.pastMask]!.data as BigInt64Array, Number)).toEqual([0, 0]);
    for (let layer = 0; layer < config.numLayers; layer++) {
      for (const name of [GEN_IO.pastKey(layer), GEN_IO.pastValue(layer)]) {
        expect(feeds[name]?.dims).toEqual([2, Hkv, 1, D]);
        expect((feeds[name]!.data as Float32Array).every((x) => x === 0)).toBe(true);
      }
    }
  });

  it('keeps a run\'s rows as slot ranges of its outputs: read through them, copied only when assembled or truncated', () => {
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
    const views = [extractRowCache(outputs, 0), extractRowCache(outputs, 1)];
    expect(views.map((v) => v.length)).toEqual([3, 2]);
    expect(views.map((v) => v.ranges)).toEqual([[[0, 1], [2, 4]], [[2, 4]]]);
    expect(views[0]!.arrays.keys[1]).toBe(outputs[GEN_IO.presentKey(1)]!.data);
    // Assembled in any order or beside another row: copied from the outputs, equal to assembling their compact forms.
    const compacts = views.map((v) => RowKvCache.compact(config, v.length, v.keys, v.values));
    for (const [mixed, compact] of [
      [[views[1], views[0]], [compacts[1], compacts[0]]],
      [[rowCache(5, 7), views[0], undefined], [rowCache(5, 7), compacts[0], undefined]],
    ] as const) {
      const got = assembleBatchCache(config, mixed);
      const want = assembleBatchCache(config, compact);
      expect(Object.keys(got).sort()).toEqual(Object.keys(want).sort());
      for (const name of Object.keys(want)) expect(got[name]).toEqual(want[name]);
    }
    // Row 0's compact keys: slots 0, 2, 3 of its first head, then of its second.
    const first = compacts[0] as RowKvCache;
    expect(first.isCompact).toBe(true);
    expect(Array.from((first.keys[0] as Float32Array).subarray(0, 3 * D))).toEqual([0, 1, 2, 6, 7, 8, 9, 10, 11]);
    // Truncating copies the first real slots into arrays of its own; a compact cache truncated to its length is itself.
    const cut = views[0]!.truncate(2);
    expect(cut.isCompact).toBe(true);
    expect(plain(cut)).toEqual(plain(first.truncate(2)));
    expect(first.truncate(3)).toBe(first);
    // A released cache (a row that left the resident batch) cannot be read.
    views[1]!.release();
    expect(() => views[1]!.truncate(1)).toThrow(/left its resident batch/);
  });

  it('keeps parked caches by key, least recently parked evicted first, counting their bytes', () => {
    const store = new KvStore(config, 0);
    store.park('a', [1, 2], rowCache(2, 1));
    store.park('b', [3], rowCache(1, 2));
    store.park('a', [1, 2, 3, 4], rowCache(4, 1)); // re-parked: now the newest
    expect(store.sizeBytes).toBe(5 * kvBytesPerToken(config));
    expect(store.makeRoom(0, 4 * kvBytesPerToken(config))).toBe(1);
    expect(store.take('b')).toBeUndefined();
    expect(store.take('a')?.length).toBe(4);
    expect(store.sizeBytes).toBe(0);
    expect(store.makeRoom(0, 0)).toBe(0);
    // More active bytes than the budget: nothing evicted, it does not fit.
    expect(store.makeRoom(1, 0)).toBeUndefined();
  });

  it('keeps shared prefixes beside the episode caches in one LRU order; a used prefix moves to the end', () => {
    const store = new KvStore(config, 0);
    store.parkPrefix([1, 2, 3, 4], rowCache(4, 1));
    store.park('a', [9], rowCache(1, 2));
    store.parkPrefix([1, 2, 5], rowCache(3, 3));
    expect([store.episodeCount, store.prefixCount]).toEqual([1, 2]);
    expect(store.sizeBytes).toBe(8 * kvBytesPerToken(config));
    const [p0, episode, p1] = store.view();
    expect([p0?.ref, episode?.ref, p1?.ref]).toEqual([{ kind: 'prefix', id: 0 }, { kind: 'episode', key: 'a' }, { kind: 'prefix', id: 1 }]);
    // A row continues the first 3 tokens of prefix 0: a compact copy, the prefix kept and now the most recently used.
    expect(plain(store.prefix(0, 3))).toEqual(plain(rowCache(4, 1).truncate(3)));
    expect(store.view().map((k) => k.ref)).toEqual([{ kind: 'episode', key: 'a' }, { kind: 'prefix', id: 1 }, { kind: 'prefix', id: 0 }]);
    // The plan the scheduler makes and the store's own eviction agree: oldest first, until the rest fits.
    const bpt = kvBytesPerToken(config);
    expect(evictionsFor(store.view(), 2 * bpt, 6 * bpt, bpt)).toEqual([{ kind: 'episode', key: 'a' }, { kind: 'prefix', id: 1 }]);
    expect(store.makeRoom(2 * bpt, 6 * bpt)).toBe(2);
    expect(store.view().map((k) => k.ref)).toEqual([{ kind: 'prefix', id: 0 }]);
    expect(store.trimPrefixes(0)).toBe(1);
    store.park('b', [1], rowCache(1, 4));
    store.clear();
    expect([store.prefixCount, store.episodeCount, store.sizeBytes]).toEqual([0, 0, 0]);
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
