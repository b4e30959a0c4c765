import { createHash, randomUUID } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { CellSchema } from '@sqlenv/protocol';
import type { Logger } from '@sqlenv/shared';

/**
 * Gold query results cached on disk, so the second load of a dataset does not
 * run its 2,000+ gold queries again. The file name carries the dataset
 * directory's key and a fingerprint of everything the results depend on; a
 * stale or corrupt file is ignored, and writing a new one removes the older
 * files of the same dataset directory.
 */

/** Bump when what is cached, or how it is computed, changes. */
export const GOLD_CACHE_VERSION = 2;

export const GoldEntrySchema = z.discriminatedUnion('ok', [
  z.strictObject({
    ok: z.literal(true),
    columns: z.array(z.string()),
    rows: z.array(z.array(CellSchema)),
    truncated: z.boolean(),
    /** The SQL that produced the rows when it differs from the file's (double-quoted strings rewritten). */
    sql: z.string().optional(),
  }),
  z.strictObject({ ok: z.literal(false), code: z.string(), message: z.string() }),
]);
export type GoldEntry = z.infer<typeof GoldEntrySchema>;

const GoldCacheFileSchema = z.strictObject({
  version: z.literal(GOLD_CACHE_VERSION),
  fingerprint: z.string(),
  /** [db_id, gold SQL, result]: keyed by query, so duplicate gold SQL runs once. */
  entries: z.array(z.tuple([z.string(), z.string(), GoldEntrySchema])),
});

export function goldKey(dbId: string, sql: string): string {
  return `${dbId}\u0000${sql}`;
}

export interface FingerprintInput {
  /** Files whose content decides the questions (small JSON files): hashed by content. */
  contentFiles: readonly string[];
  /** SQLite files: size and modification time, so a large database is not re-read to fingerprint it. */
  databaseFiles: readonly string[];
  /** Settings that change results (row cap...). */
  settings: Record<string, unknown>;
}

export async function goldFingerprint(input: FingerprintInput): Promise<string> {
  const hash = createHash('sha256');
  hash.update(JSON.stringify({ version: GOLD_CACHE_VERSION, settings: input.settings }));
  for (const file of [...input.contentFiles].sort()) {
    hash.update(`\nfile:${file}:`);
    hash.update(await readFile(file));
  }
  for (const file of [...input.databaseFiles].sort()) {
    const info = await stat(file);
    hash.update(`\ndb:${file}:${info.size}:${info.mtimeMs}`);
  }
  return hash.digest('hex').slice(0, 32);
}

/** Short key of a dataset directory (its resolved path), shared by all its cache files. */
function datasetKey(datasetDir: string): string {
  return createHash('sha256').update(datasetDir).digest('hex').slice(0, 12);
}

export function goldCachePath(cacheDir: string, datasetDir: string, fingerprint: string): string {
  return join(cacheDir, `gold-${datasetKey(datasetDir)}-${fingerprint}.json`);
}

/**
 * Remove the cache files of `datasetDir` other than `keep` (left over from
 * earlier versions of its files). Best effort: a file another process is
 * still using only costs it a recomputation.
 */
export async function pruneGoldCache(cacheDir: string, datasetDir: string, keep: string): Promise<string[]> {
  const prefix = `gold-${datasetKey(datasetDir)}-`;
  const removed: string[] = [];
  for (const name of await readdir(cacheDir).catch(() => [] as string[])) {
    const path = join(cacheDir, name);
    if (!name.startsWith(prefix) || !name.endsWith('.json') || path === keep) continue;
    await rm(path, { force: true }).then(() => removed.push(path), () => undefined);
  }
  return removed;
}

/** Cached entries by goldKey, or an empty map when there is no usable cache file. */
export async function readGoldCache(path: string, fingerprint: string, logger: Logger): Promise<Map<string, GoldEntry>> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch {
    return new Map();
  }
  try {
    const parsed = GoldCacheFileSchema.safeParse(JSON.parse(text));
    if (parsed.success && parsed.data.fingerprint === fingerprint) {
      return new Map(parsed.data.entries.map(([dbId, sql, entry]) => [goldKey(dbId, sql), entry]));
    }
  } catch {
    // Corrupt JSON: fall through and recompute.
  }
  logger.warn({ path }, 'ignoring unusable gold cache file');
  return new Map();
}

/** Write atomically (temp file + rename) so a concurrent reader never sees half a file. */
export async function writeGoldCache(path: string, cacheDir: string, fingerprint: string, entries: ReadonlyMap<string, GoldEntry>): Promise<void> {
  const rows: [string, string, GoldEntry][] = [];
  for (const [key, entry] of entries) {
    const split = key.indexOf('\u0000');
    rows.push([key.slice(0, split), key.slice(split + 1), entry]);
  }
  await mkdir(cacheDir, { recursive: true });
  const temp = `${path}.${randomUUID()}.tmp`;
  await writeFile(temp, JSON.stringify({ version: GOLD_CACHE_VERSION, fingerprint, entries: rows }));
  await rename(temp, path);
}
