import { AppError, ErrorCode } from '@sqlenv/shared';
import type { ModelConfig } from '../io/config.ts';
import { kvBytesPerToken, type RowKvCache } from './kv-cache.ts';
import { ResidentBatch } from './resident-batch.ts';

/** A kept cache: an episode's (by its key) or a shared prompt prefix (by its id). */
export type CacheRef = { kind: 'episode'; key: string } | { kind: 'prefix'; id: number };

/** What the scheduler sees of a kept cache: the ids it holds. */
export interface KeptCacheView {
  ref: CacheRef;
  ids: readonly number[];
}

interface Kept extends KeptCacheView {
  cache: RowKvCache;
}

const refKey = (ref: CacheRef): string => (ref.kind === 'episode' ? `e:${ref.key}` : `p:${ref.id}`);

/**
 * Kept caches in least-recently-used order (oldest first) that must go so that `activeBytes` of active
 * rows plus the rest fit `budgetBytes`; undefined when even none kept would not. The one eviction rule:
 * the scheduler plans with it, the store applies it.
 */
export function evictionsFor(kept: readonly KeptCacheView[], activeBytes: number, budgetBytes: number, bytesPerToken: number): CacheRef[] | undefined {
  if (activeBytes > budgetBytes) return undefined;
  let tokens = kept.reduce((n, k) => n + k.ids.length, 0);
  const out: CacheRef[] = [];
  for (const k of kept) {
    if (activeBytes + tokens * bytesPerToken <= budgetBytes) break;
    out.push(k.ref);
    tokens -= k.ids.length;
  }
  return out;
}

/**
 * The one owner of every KV cache between runs: episodes' caches parked between their turns, shared
 * prompt prefixes (the system prompt, a GRPO group's first prompt) that turns without a cache of their
 * own start from, both in one least-recently-used order, and the decode batch kept resident between
 * chunks. Rows being run hold their caches themselves (slot ranges of the run's outputs or of the
 * decode batch); a finished row's cache is parked here, copied out compact.
 */
export class KvStore {
  readonly #config: ModelConfig;
  readonly #bytesPerToken: number;
  /** Oldest first: a cache parked or used again moves to the end. */
  readonly #kept = new Map<string, Kept>();
  #tokens = 0;
  #episodes = 0;
  #nextPrefix = 0;
  #decodeBatch: ResidentBatch | undefined;
  readonly #marginSlots: number;

  /** `marginSlots`: the decode batch's room for the slots of the next chunks (0: no decode batch, static batching). */
  constructor(config: ModelConfig, marginSlots: number) {
    this.#config = config;
    this.#bytesPerToken = kvBytesPerToken(config);
    this.#marginSlots = marginSlots;
  }

  /** Bytes of every kept cache (the decode batch's rows are the active rows' and not counted). */
  get sizeBytes(): number {
    return this.#tokens * this.#bytesPerToken;
  }

  /** Episode caches kept. */
  get episodeCount(): number {
    return this.#episodes;
  }

  get prefixCount(): number {
    return this.#kept.size - this.#episodes;
  }

  /** Every kept cache, oldest first. */
  view(): KeptCacheView[] {
    return [...this.#kept.values()].map(({ ref, ids }) => ({ ref, ids }));
  }

  /** Keep a finished turn's cache (the `ids` it holds) for its episode's next turn. */
  park(key: string, ids: readonly number[], cache: RowKvCache): void {
    this.take(key);
    this.#add({ ref: { kind: 'episode', key }, ids, cache });
  }

  /** Keep a prompt's cache (its `ids` and nothing more) for other turns that start with the same ids. */
  parkPrefix(ids: readonly number[], cache: RowKvCache): void {
    this.#add({ ref: { kind: 'prefix', id: this.#nextPrefix++ }, ids, cache });
  }

  /** Remove and return an episode's cache (the turn that claims it owns it now). */
  take(key: string): RowKvCache | undefined {
    const kept = this.#kept.get(refKey({ kind: 'episode', key }));
    if (kept === undefined) return undefined;
    this.#remove(kept);
    return kept.cache;
  }

  /** The first `length` tokens of a shared prefix, copied for a row to continue; marks the prefix used. */
  prefix(id: number, length: number): RowKvCache {
    const key = refKey({ kind: 'prefix', id });
    const kept = this.#kept.get(key);
    if (kept === undefined) throw new AppError(ErrorCode.INTERNAL, `no shared prefix ${id}`);
    this.#kept.delete(key);
    this.#kept.set(key, kept);
    return kept.cache.truncate(length);
  }

  /** Drop kept caches; how many were there. */
  evict(refs: readonly CacheRef[]): number {
    let n = 0;
    for (const ref of refs) {
      const kept = this.#kept.get(refKey(ref));
      if (kept === undefined) continue;
      this.#remove(kept);
      n++;
    }
    return n;
  }

  /** Evict until `activeBytes` plus what is kept fits `budgetBytes`: how many went, or undefined when even an empty store would not fit. */
  makeRoom(activeBytes: number, budgetBytes: number): number | undefined {
    const refs = evictionsFor(this.view(), activeBytes, budgetBytes, this.#bytesPerToken);
    return refs === undefined ? undefined : this.evict(refs);
  }

  /** Evict the oldest caches (either kind) while more than `episodes` episode caches are kept; how many went. */
  trimEpisodes(episodes: number): number {
    let n = 0;
    while (this.#episodes > episodes) n += this.evict([(this.#kept.values().next().value as Kept).ref]);
    return n;
  }

  /** Evict the oldest shared prefixes while more than `prefixes` are kept; how many went. */
  trimPrefixes(prefixes: number): number {
    let n = 0;
    for (const kept of [...this.#kept.values()]) {
      if (this.prefixCount <= prefixes) break;
      if (kept.ref.kind === 'prefix') n += this.evict([kept.ref]);
    }
    return n;
  }

  /** Drop every kept cache (an adapter swap made them stale). */
  clear(): void {
    this.#kept.clear();
    this.#tokens = 0;
    this.#episodes = 0;
  }

  /**
   * Make the decode batch hold exactly these rows' caches and return them as its rows, in the order
   * given.
   */
  holdDecodeBatch(caches: readonly (RowKvCache | undefined)[]): { batch: ResidentBatch; rows: RowKvCache[] } {
    if (this.#marginSlots === 0) throw new AppError(ErrorCode.INTERNAL, 'static batching keeps no decode batch');
    if (this.#decodeBatch === undefined) this.#decodeBatch = new ResidentBatch(this.#config, this.#marginSlots);
    return { batch: this.#decodeBatch, rows: this.#decodeBatch.hold(caches) };
  }

  /** Nothing left to decode: the decode batch's arrays go (the next rows start new ones). */
  dropDecodeBatch(): void {
    this.#decodeBatch?.clear();
  }

  #add(kept: Kept): void {
    this.#kept.set(refKey(kept.ref), kept);
    this.#tokens += kept.cache.length;
    if (kept.ref.kind === 'episode') this.#episodes++;
  }

  #remove(kept: Kept): void {
    this.#kept.delete(refKey(kept.ref));
    this.#tokens -= kept.cache.length;
    if (kept.ref.kind === 'episode') this.#episodes--;
  }
}
