/**
 * Which engine `cacheKey` holds the KV cache of a token sequence, for clients that re-send an
 * episode's whole context every turn and never name the episode. After a turn the server records
 * prompt ++ completion under the turn's cacheKey; a later prompt that starts with a recorded sequence
 * continues that key (the longest such sequence, compared id by id), so the engine prefills only the
 * appended tail. A claimed entry leaves the map, so two requests never continue one cache at once.
 *
 * Partitions (served model + cache salt) never share entries. Least recently recorded entries are
 * dropped beyond `maxEntries`: the map stays bounded whether or not episodes end.
 */
interface Entry {
  id: number;
  partition: string;
  ids: Int32Array;
  cacheKey: string;
}

/** Entries of one partition, by prefix hash, and how many entries have each length. */
interface Partition {
  byHash: Map<string, Entry>;
  lengthCounts: Map<number, number>;
}

export class ContextCache {
  readonly #maxEntries: number;
  readonly #partitions = new Map<string, Partition>();
  /** Every entry, least recently recorded first. */
  readonly #lru = new Map<number, Entry>();
  #nextId = 0;

  constructor(maxEntries: number) {
    if (!Number.isInteger(maxEntries) || maxEntries < 1) throw new RangeError(`maxEntries must be an integer ≥ 1, got ${maxEntries}`);
    this.#maxEntries = maxEntries;
  }

  get size(): number {
    return this.#lru.size;
  }

  /** The cacheKey of the longest recorded sequence `prompt` starts with (removed from the map), or undefined. */
  claim(partition: string, prompt: readonly number[]): string | undefined {
    const part = this.#partitions.get(partition);
    if (part === undefined) return undefined;
    let best: Entry | undefined;
    const hash = new PrefixHash();
    for (let i = 0; i < prompt.length; i++) {
      hash.push(prompt[i] as number);
      const length = i + 1;
      if (!part.lengthCounts.has(length)) continue;
      const entry = part.byHash.get(hash.key(length));
      if (entry !== undefined && startsWith(prompt, entry.ids)) best = entry;
    }
    if (best === undefined) return undefined;
    this.#remove(best);
    return best.cacheKey;
  }

  /** `sequence` (prompt ++ completion) is now in the engine's cache under `cacheKey`. */
  record(partition: string, sequence: readonly number[], cacheKey: string): void {
    if (sequence.length === 0) return;
    const hash = new PrefixHash();
    for (const id of sequence) hash.push(id);
    const key = hash.key(sequence.length);
    const previous = this.#partitions.get(partition)?.byHash.get(key);
    if (previous !== undefined) this.#remove(previous);
    let part = this.#partitions.get(partition);
    if (part === undefined) {
      part = { byHash: new Map(), lengthCounts: new Map() };
      this.#partitions.set(partition, part);
    }
    const entry: Entry = { id: this.#nextId++, partition, ids: Int32Array.from(sequence), cacheKey };
    part.byHash.set(key, entry);
    part.lengthCounts.set(sequence.length, (part.lengthCounts.get(sequence.length) ?? 0) + 1);
    this.#lru.set(entry.id, entry);
    for (const oldest of this.#lru.values()) {
      if (this.#lru.size <= this.#maxEntries) break;
      this.#remove(oldest);
    }
  }

  /** Forget a partition (its adapter was unloaded). */
  dropPartitions(matches: (partition: string) => boolean): void {
    for (const entry of [...this.#lru.values()]) if (matches(entry.partition)) this.#remove(entry);
  }

  #remove(entry: Entry): void {
    this.#lru.delete(entry.id);
    const part = this.#partitions.get(entry.partition);
    if (part === undefined) return;
    const hash = new PrefixHash();
    for (const id of entry.ids) hash.push(id);
    part.byHash.delete(hash.key(entry.ids.length));
    const left = (part.lengthCounts.get(entry.ids.length) ?? 1) - 1;
    if (left > 0) part.lengthCounts.set(entry.ids.length, left);
    else part.lengthCounts.delete(entry.ids.length);
    if (part.byHash.size === 0) this.#partitions.delete(entry.partition);
  }
}

function startsWith(prompt: readonly number[], prefix: Int32Array): boolean {
  if (prefix.length > prompt.length) return false;
  for (let i = 0; i < prefix.length; i++) if (prompt[i] !== prefix[i]) return false;
  return true;
}

/** Two independent 32-bit polynomial hashes of a growing id sequence; a collision only costs a miss (entries are compared id by id). */
class PrefixHash {
  #a = 0x811c9dc5;
  #b = 0x1b873593;

  push(id: number): void {
    this.#a = (Math.imul(this.#a, 0x01000193) + id + 1) | 0;
    this.#b = (Math.imul(this.#b ^ (id + 0x9e3779b9), 0x85ebca6b) + 0x7f4a7c15) | 0;
  }

  key(length: number): string {
    return `${length}:${this.#a >>> 0}:${this.#b >>> 0}`;
  }
}
