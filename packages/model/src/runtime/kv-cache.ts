import { elementCount, tensor, type TensorData } from '@sqlenv/onnx-graph';
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

/** Where a row's slots go in a (·, Hkv, width, D) batch feed: its row starts at `base`, its slots at `pad`. */
export interface BatchRowSlot {
  data: Float32Array;
  base: number;
  width: number;
  pad: number;
}

/**
 * The first `length` of the `srcLength` slots of a compact (Hkv, srcLength, D) array, copied into a
 * batch row (`out`) or into a new compact (Hkv, length, D) array.
 */
export function copyCompactSlots(src: Float32Array, srcLength: number, length: number, Hkv: number, D: number, out?: BatchRowSlot): Float32Array {
  const dst = out?.data ?? new Float32Array(Hkv * length * D);
  for (let h = 0; h < Hkv; h++) {
    const at = out === undefined ? h * length * D : out.base + (h * out.width + out.pad) * D;
    dst.set(src.subarray(h * srcLength * D, (h * srcLength + length) * D), at);
  }
  return dst;
}

/**
 * A cache that holds no compact arrays of its own but copies its slots from where they live (a run's
 * outputs, a resident batch's arrays): batches and truncations copy straight from there.
 */
export interface SlotCopyingCache extends RowKvCache {
  /**
   * Copy the first `length` real slots of one layer's keys (or values) into `out` at row offset
   * `pad` of a (·, Hkv, S, D) batch feed whose row starts at `base`; with no `out`, a compact
   * (Hkv, length, D) array.
   */
  copyLayer(name: 'key' | 'value', layer: number, length: number, out?: BatchRowSlot): Float32Array;
  /** Its first `length` real slots as a compact cache of their own. */
  slots(length: number): RowKvCache;
}

function copiesOwnSlots(cache: RowKvCache): cache is SlotCopyingCache {
  return typeof (cache as Partial<SlotCopyingCache>).copyLayer === 'function';
}

/** The first `length` slots of every layer of a cache that copies its own, as a compact cache (its `slots`). */
export function copiedSlots(cache: Pick<SlotCopyingCache, 'copyLayer'>, numLayers: number, length: number): RowKvCache {
  const keys: Float32Array[] = [];
  const values: Float32Array[] = [];
  for (let layer = 0; layer < numLayers; layer++) {
    keys.push(cache.copyLayer('key', layer, length));
    values.push(cache.copyLayer('value', layer, length));
  }
  return { length, keys, values };
}

/** One layer's keys (or values) of a row's whole cache into its slot of a batch feed, whatever kind of cache it is. */
export function copyRowLayer(cache: RowKvCache, which: 'key' | 'value', layer: number, Hkv: number, D: number, slot: BatchRowSlot): void {
  if (copiesOwnSlots(cache)) cache.copyLayer(which, layer, cache.length, slot);
  else copyCompactSlots((which === 'key' ? cache.keys : cache.values)[layer] as Float32Array, cache.length, cache.length, Hkv, D, slot);
}

/**
 * A row of a run's present outputs, not copied: what `extractRowCache` returns. The next run of the
 * same rows in the same order feeds those outputs unchanged (`assembleBatchCache`), and any other use
 * copies its real slots straight from them, so a decode chunk copies no cache at all and a run that
 * mixes rows copies each once (docs/inference.md, "Memory of a run with a kept cache"). `keys` and
 * `values` compact it on first access and let go of the outputs; parking a cache (`compactRowCache`,
 * `truncateRowCache`) does the same, so only the rows still decoding keep a run's outputs alive.
 */
export class RowCacheView implements SlotCopyingCache {
  readonly length: number;
  readonly #config: ModelConfig;
  #source: Record<string, TensorData> | undefined;
  /** Row of the source batch, its width S, and the runs [start, end) of real slots in order. */
  readonly row: number;
  readonly width: number;
  readonly runs: readonly (readonly [number, number])[];
  #compact: { keys: Float32Array[]; values: Float32Array[] } | undefined;

  constructor(config: ModelConfig, outputs: Record<string, TensorData>, row: number) {
    const maskT = outputs[GEN_IO.presentMask] as TensorData;
    const S = maskT.dims[1] as number;
    const mask = (maskT.data as BigInt64Array).subarray(row * S, (row + 1) * S);
    // Runs of real slots: left padding of the cache and of the new tokens leaves holes.
    const runs: [number, number][] = [];
    for (let s = 0; s < S; s++) {
      if (mask[s] === 0n) continue;
      const last = runs[runs.length - 1];
      if (last !== undefined && last[1] === s) last[1] = s + 1;
      else runs.push([s, s + 1]);
    }
    this.#config = config;
    this.#source = outputs;
    this.row = row;
    this.width = S;
    this.runs = runs;
    this.length = runs.reduce((n, [s, e]) => n + e - s, 0);
  }

  /** The run outputs this row still reads from; undefined once compacted. */
  get source(): Record<string, TensorData> | undefined {
    return this.#source;
  }

  get keys(): Float32Array[] {
    return this.#materialise().keys;
  }

  get values(): Float32Array[] {
    return this.#materialise().values;
  }

  copyLayer(name: 'key' | 'value', layer: number, length: number, out?: BatchRowSlot): Float32Array {
    const { numKvHeads: Hkv, headDim: D } = this.#config;
    const compact = this.#compact;
    if (compact !== undefined) return copyCompactSlots((name === 'key' ? compact.keys : compact.values)[layer] as Float32Array, this.length, length, Hkv, D, out);
    const source = this.#source as Record<string, TensorData>;
    const src = (source[name === 'key' ? GEN_IO.presentKey(layer) : GEN_IO.presentValue(layer)] as TensorData).data as Float32Array;
    const dst = out?.data ?? new Float32Array(Hkv * length * D);
    const S = this.width;
    for (let h = 0; h < Hkv; h++) {
      let at = out === undefined ? h * length * D : out.base + (h * out.width + out.pad) * D;
      let left = length;
      for (const [s, e] of this.runs) {
        if (left === 0) break;
        const n = Math.min(e - s, left);
        const from = ((this.row * Hkv + h) * S + s) * D;
        dst.set(src.subarray(from, from + n * D), at);
        at += n * D;
        left -= n;
      }
    }
    return dst;
  }

  slots(length: number): RowKvCache {
    return copiedSlots(this, this.#config.numLayers, length);
  }

  #materialise(): { keys: Float32Array[]; values: Float32Array[] } {
    if (this.#compact === undefined) {
      this.#compact = this.slots(this.length);
      this.#source = undefined;
    }
    return this.#compact;
  }
}

/** A cache that holds nothing but its own arrays: a view is compacted (and lets go of its run's outputs), a resident row copied out. */
export function compactRowCache(cache: RowKvCache): RowKvCache {
  if (cache instanceof RowCacheView) return { length: cache.length, keys: cache.keys, values: cache.values };
  return copiesOwnSlots(cache) ? cache.slots(cache.length) : cache;
}

/** The first `length` tokens of a cache (dropping what was fed after a row's last valid token), compacted. */
export function truncateRowCache(config: ModelConfig, cache: RowKvCache, length: number): RowKvCache {
  if (length >= cache.length) return compactRowCache(cache);
  if (copiesOwnSlots(cache)) return cache.slots(length);
  const { numKvHeads: Hkv, headDim: D } = config;
  const cut = (x: Float32Array): Float32Array => copyCompactSlots(x, cache.length, length, Hkv, D);
  return { length, keys: cache.keys.map(cut), values: cache.values.map(cut) };
}

/**
 * The outputs every row views when `rows` are exactly the rows of one run, in its order, none
 * compacted: they are then the next run's past feeds as they are (their holes stay masked).
 */
function sameRun(rows: readonly (RowKvCache | undefined)[]): Record<string, TensorData> | undefined {
  const first = rows[0];
  if (!(first instanceof RowCacheView) || first.source === undefined) return undefined;
  const source = first.source;
  const B = (source[GEN_IO.presentMask] as TensorData).dims[0] as number;
  if (rows.length !== B) return undefined;
  return rows.every((r, b) => r instanceof RowCacheView && r.source === source && r.row === b) ? source : undefined;
}

/** Whether `assembleBatchCache` feeds these rows their run's outputs as they are (no copy). */
export function feedsRunUncopied(rows: readonly (RowKvCache | undefined)[]): boolean {
  return sameRun(rows) !== undefined;
}

/**
 * Past-cache feeds for a batch: each row's cache left-padded to the longest, (B, Hkv, S, D) per layer
 * and the (B, S) mask. Rows that are one run's rows in its order feed that run's outputs uncopied.
 */
export function assembleBatchCache(config: ModelConfig, rows: readonly (RowKvCache | undefined)[]): Record<string, TensorData> {
  const { numLayers, numKvHeads: Hkv, headDim: D } = config;
  const same = sameRun(rows);
  if (same !== undefined) {
    const feeds: Record<string, TensorData> = { [GEN_IO.pastMask]: same[GEN_IO.presentMask] as TensorData };
    for (let layer = 0; layer < numLayers; layer++) {
      feeds[GEN_IO.pastKey(layer)] = same[GEN_IO.presentKey(layer)] as TensorData;
      feeds[GEN_IO.pastValue(layer)] = same[GEN_IO.presentValue(layer)] as TensorData;
    }
    return feeds;
  }
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
        copyRowLayer(r, which, layer, Hkv, D, { data, base: b * Hkv * S * D, width: S, pad: S - r.length });
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

/** Row `b` of a run's present cache: a view of the outputs (its real slots, mask 1, in order), copied only when needed. */
export function extractRowCache(config: ModelConfig, outputs: Record<string, TensorData>, b: number): RowKvCache {
  return new RowCacheView(config, outputs, b);
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
