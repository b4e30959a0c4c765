import { tensor, type TensorData } from '@sqlenv/onnx-graph';
import { maxOf } from '@sqlenv/shared';
import type { ModelConfig } from '../io/config.ts';
import { GEN_IO } from '../graphs/generation-graph.ts';

/**
 * Host-side KV caches of single sequences, kept between generation runs.
 *
 * A row's cache is stored compacted: per layer, keys and values (Hkv, L, D)
 * of its L real tokens in order, no padding slots. Compaction is exact: RoPE
 * is already applied to the stored keys and positions come from
 * cumsum(mask) − 1, so dropping masked slots changes no position, and a masked
 * key adds exactly 0 to the softmax. A batch is assembled by left-padding each
 * row's cache to the longest (mask 0 in front), like the prompts.
 */
export interface RowKvCache {
  /** Real tokens held. */
  length: number;
  /** Per layer, (Hkv, length, D) float32. */
  keys: Float32Array[];
  values: Float32Array[];
}

/** Bytes one cached token takes: every layer's key and value, float32. */
export function kvBytesPerToken(config: ModelConfig): number {
  return config.numLayers * 2 * config.numKvHeads * config.headDim * 4;
}

export function rowCacheBytes(config: ModelConfig, cache: RowKvCache | undefined): number {
  return cache === undefined ? 0 : cache.length * kvBytesPerToken(config);
}

/** The first `length` tokens of a cache (dropping what was fed after a row's last valid token). */
export function truncateRowCache(config: ModelConfig, cache: RowKvCache, length: number): RowKvCache {
  if (length >= cache.length) return cache;
  const { numKvHeads: Hkv, headDim: D } = config;
  const cut = (x: Float32Array): Float32Array => {
    const out = new Float32Array(Hkv * length * D);
    for (let h = 0; h < Hkv; h++) out.set(x.subarray(h * cache.length * D, (h * cache.length + length) * D), h * length * D);
    return out;
  };
  return { length, keys: cache.keys.map(cut), values: cache.values.map(cut) };
}

/** Past-cache feeds for a batch: each row's cache left-padded to the longest, (B, Hkv, S, D) per layer and the (B, S) mask. */
export function assembleBatchCache(config: ModelConfig, rows: readonly (RowKvCache | undefined)[]): Record<string, TensorData> {
  const { numLayers, numKvHeads: Hkv, headDim: D } = config;
  const B = rows.length;
  const S = maxOf(rows.map((r) => r?.length ?? 0), 0);
  const mask = new BigInt64Array(B * S);
  rows.forEach((r, b) => mask.fill(1n, b * S + S - (r?.length ?? 0), (b + 1) * S));
  const feeds: Record<string, TensorData> = { [GEN_IO.pastMask]: tensor('int64', [B, S], mask) };
  for (let layer = 0; layer < numLayers; layer++) {
    for (const [name, pick] of [
      [GEN_IO.pastKey(layer), (r: RowKvCache) => r.keys[layer]],
      [GEN_IO.pastValue(layer), (r: RowKvCache) => r.values[layer]],
    ] as const) {
      const data = new Float32Array(B * Hkv * S * D);
      rows.forEach((r, b) => {
        if (r === undefined || r.length === 0) return;
        const src = pick(r) as Float32Array;
        const pad = S - r.length;
        for (let h = 0; h < Hkv; h++) data.set(src.subarray(h * r.length * D, (h + 1) * r.length * D), ((b * Hkv + h) * S + pad) * D);
      });
      feeds[name] = tensor('float32', [B, Hkv, S, D], data);
    }
  }
  return feeds;
}

/** Row `b` of a run's present cache, compacted to its real slots (mask 1) in order. */
export function extractRowCache(config: ModelConfig, outputs: Record<string, TensorData>, b: number): RowKvCache {
  const { numLayers, numKvHeads: Hkv, headDim: D } = config;
  const maskT = outputs[GEN_IO.presentMask] as TensorData;
  const S = maskT.dims[1] as number;
  const mask = (maskT.data as BigInt64Array).subarray(b * S, (b + 1) * S);
  // Runs of real slots [start, end): left padding of the cache and of the new tokens leaves holes.
  const runs: [number, number][] = [];
  for (let s = 0; s < S; s++) {
    if (mask[s] === 0n) continue;
    const last = runs[runs.length - 1];
    if (last !== undefined && last[1] === s) last[1] = s + 1;
    else runs.push([s, s + 1]);
  }
  const length = runs.reduce((n, [s, e]) => n + e - s, 0);
  const compact = (name: string): Float32Array => {
    const src = (outputs[name] as TensorData).data as Float32Array;
    const out = new Float32Array(Hkv * length * D);
    for (let h = 0; h < Hkv; h++) {
      let at = h * length * D;
      for (const [s, e] of runs) {
        const from = ((b * Hkv + h) * S + s) * D;
        out.set(src.subarray(from, from + (e - s) * D), at);
        at += (e - s) * D;
      }
    }
    return out;
  };
  const keys: Float32Array[] = [];
  const values: Float32Array[] = [];
  for (let layer = 0; layer < numLayers; layer++) {
    keys.push(compact(GEN_IO.presentKey(layer)));
    values.push(compact(GEN_IO.presentValue(layer)));
  }
  return { length, keys, values };
}

/** A finished turn's cache, waiting for the episode's next turn. */
export interface ParkedCache {
  /** The token ids the cache holds, in order. */
  ids: readonly number[];
  cache: RowKvCache;
}

/** Length of the common prefix of two id sequences. */
export function commonPrefixLength(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

interface Stamped {
  entry: ParkedCache;
  /** When it was parked or last used: eviction drops the smallest first, over both kinds. */
  stamp: number;
}

/**
 * Parked caches by key (an episode id), and shared prefixes: prompt caches any
 * turn without a cache of its own may start from (the system prompt, a GRPO
 * group's common first prompt). One least-recently-used order over both.
 * Holds no byte bound itself: the scheduler evicts from here when the active
 * rows and the parked caches together would pass its budget.
 */
export class KvCacheStore {
  // Both maps are kept in stamp order (an entry used again is moved to the end).
  readonly #entries = new Map<string, Stamped>();
  readonly #prefixes = new Map<number, Stamped>();
  readonly #bytesPerToken: number;
  #tokens = 0;
  #clock = 0;

  constructor(config: ModelConfig) {
    this.#bytesPerToken = kvBytesPerToken(config);
  }

  /** Bytes of every parked cache and shared prefix. */
  get sizeBytes(): number {
    return this.#tokens * this.#bytesPerToken;
  }

  /** Episode caches parked (shared prefixes not counted). */
  get size(): number {
    return this.#entries.size;
  }

  /** Shared prefixes held. */
  get prefixCount(): number {
    return this.#prefixes.size;
  }

  park(key: string, entry: ParkedCache): void {
    this.take(key);
    this.#entries.set(key, { entry, stamp: ++this.#clock });
    this.#tokens += entry.cache.length;
  }

  /** Remove and return a key's cache (the turn that claims it owns it now). */
  take(key: string): ParkedCache | undefined {
    const stamped = this.#entries.get(key);
    if (stamped === undefined) return undefined;
    this.#entries.delete(key);
    this.#tokens -= stamped.entry.cache.length;
    return stamped.entry;
  }

  /** Keep a prompt's cache (its `ids` and nothing more) for other turns that start with the same ids. */
  parkPrefix(entry: ParkedCache): void {
    this.#prefixes.set(this.#clock + 1, { entry, stamp: ++this.#clock });
    this.#tokens += entry.cache.length;
  }

  /**
   * The shared prefix with the longest common start with `ids`, at most `limit` tokens of it
   * (`length`); the caller truncates `cache` to `length`. Marks it used. Undefined when none shares a token.
   */
  longestPrefix(ids: readonly number[], limit: number): { cache: RowKvCache; length: number } | undefined {
    let best: [number, Stamped] | undefined;
    let bestLength = 0;
    for (const [key, stamped] of this.#prefixes) {
      const length = Math.min(limit, commonPrefixLength(ids, stamped.entry.ids));
      if (length > bestLength) {
        best = [key, stamped];
        bestLength = length;
      }
    }
    if (best === undefined) return undefined;
    const [key, stamped] = best;
    this.#prefixes.delete(key);
    stamped.stamp = ++this.#clock;
    this.#prefixes.set(stamped.stamp, stamped);
    return { cache: stamped.entry.cache, length: bestLength };
  }

  /** Drop the least recently used cache, an episode's or a shared prefix; false when both are empty. */
  evictOldest(): boolean {
    const episode = this.#entries.entries().next();
    const prefix = this.#prefixes.values().next();
    if (episode.done === true && prefix.done === true) return false;
    if (prefix.done === true || (episode.done !== true && episode.value[1].stamp < prefix.value.stamp)) {
      this.take((episode.value as [string, Stamped])[0]);
      return true;
    }
    return this.evictOldestPrefix();
  }

  /** Drop the least recently used shared prefix; false when none. */
  evictOldestPrefix(): boolean {
    const first = this.#prefixes.entries().next();
    if (first.done === true) return false;
    this.#prefixes.delete(first.value[0]);
    this.#tokens -= first.value[1].entry.cache.length;
    return true;
  }

  clear(): void {
    this.#entries.clear();
    this.#prefixes.clear();
    this.#tokens = 0;
  }
}
