import type { Cell } from '@sqlenv/protocol';

export interface SampleRows {
  columns: string[];
  rows: Cell[][];
}

/**
 * SAMPLE results shared by every episode of a runtime. Databases are opened
 * read-only, so `SELECT * FROM t LIMIT n` always returns the same rows; the
 * first episode to sample a table pays for the query, concurrent ones await
 * the same promise. A failed load is forgotten so the next call retries.
 * Size is bounded by the number of tables in the dataset.
 */
export class SampleCache {
  readonly #entries = new Map<string, Promise<SampleRows>>();

  get(dbPath: string, table: string, rowCount: number, load: () => Promise<SampleRows>): Promise<SampleRows> {
    const key = `${dbPath}\u0000${table}\u0000${rowCount}`;
    let entry = this.#entries.get(key);
    if (entry === undefined) {
      entry = load();
      this.#entries.set(key, entry);
      entry.catch(() => this.#entries.delete(key));
    }
    return entry;
  }

  get size(): number {
    return this.#entries.size;
  }
}
