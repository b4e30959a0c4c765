import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { linkSync, rmSync } from 'node:fs';
import { readdir, readFile, rm, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { z } from 'zod';
import { CellSchema } from '@sqlenv/protocol';
import { AppError, ErrorCode, readTrustedFile, writeExclusiveTemp, writePrivateFile, type Logger } from '@sqlenv/shared';

/**
 * Gold query results cached on disk, so the second load of a dataset does not
 * run its 2,000+ gold queries again. The file name carries the dataset
 * directory's key and a fingerprint of everything the results depend on; a
 * stale or corrupt file is ignored, and writing a new one removes the older
 * files of the same dataset directory.
 *
 * The gold rows decide what scores 1.0, so a file is authenticated: its first
 * line is an HMAC-SHA256 of the rest under a random key kept in the cache
 * directory (`gold.key`, 32 bytes, created 0600 with exclusive creation
 * and read only when it is this user's regular file that nobody else may
 * read). A file whose HMAC does not match — edited, truncated, copied from
 * another cache, written without the key — is ignored and its entries are
 * recomputed. The payload names its fingerprint (which covers the dataset's
 * paths and contents), so a genuine file cannot be replayed for another
 * dataset either. The cache directory itself must be private (checked by the
 * loader): whoever can write it could replace the key. See docs/sandbox.md.
 */

/** Bump when what is cached, or how it is computed, changes. */
export const GOLD_CACHE_VERSION = 3;

/** The HMAC key's file name in the cache directory. */
export const GOLD_CACHE_KEY_FILE = 'gold.key';
const KEY_BYTES = 32;

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

/**
 * The cache directory's HMAC key, created on first use. Throws UNSAFE_PATH
 * when the file there is not a key this user alone can read.
 */
export function goldCacheKey(cacheDir: string): Buffer {
  const path = join(cacheDir, GOLD_CACHE_KEY_FILE);
  let key = readTrustedFile(path, { secret: true });
  if (key === undefined) {
    const temp = writeExclusiveTemp(cacheDir, GOLD_CACHE_KEY_FILE, randomBytes(KEY_BYTES), 0o600);
    try {
      // link, not rename: when another process created its key meanwhile, keep
      // theirs (the files it already wrote stay valid) and read it below.
      linkSync(temp, path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    } finally {
      rmSync(temp, { force: true });
    }
    key = readTrustedFile(path, { secret: true });
  }
  if (key?.length !== KEY_BYTES) {
    throw new AppError(ErrorCode.UNSAFE_PATH, `refusing to use ${path}: it is not a gold cache key (${key?.length ?? 0} bytes, expected ${KEY_BYTES}); remove it (a new one is made)`, { details: { path } });
  }
  return key;
}

function mac(key: Buffer, payload: string): string {
  return createHmac('sha256', key).update(payload).digest('hex');
}

/** Cached entries by goldKey, or an empty map when there is no usable, authentic cache file. */
export async function readGoldCache(path: string, fingerprint: string, key: Buffer, logger: Logger): Promise<Map<string, GoldEntry>> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch {
    return new Map();
  }
  const newline = text.indexOf('\n');
  const payload = text.slice(newline + 1);
  const expected = Buffer.from(mac(key, payload), 'hex');
  const stated = Buffer.from(newline === -1 ? '' : text.slice(0, newline), 'hex');
  if (stated.length !== expected.length || !timingSafeEqual(stated, expected)) {
    logger.warn({ path }, 'gold cache file failed its authentication check (modified, or written with another key): recomputing its entries');
    return new Map();
  }
  try {
    const parsed = GoldCacheFileSchema.safeParse(JSON.parse(payload));
    if (parsed.success && parsed.data.fingerprint === fingerprint) {
      return new Map(parsed.data.entries.map(([dbId, sql, entry]) => [goldKey(dbId, sql), entry]));
    }
  } catch {
    // Corrupt JSON: fall through and recompute.
  }
  logger.warn({ path }, 'ignoring unusable gold cache file');
  return new Map();
}

/**
 * Write atomically (exclusive temp file + rename, see @sqlenv/shared
 * private-dir.ts) so a concurrent reader never sees half a file, with the
 * payload's HMAC as its first line. `path` is in the cache directory, which
 * the caller has checked.
 */
export function writeGoldCache(path: string, fingerprint: string, key: Buffer, entries: ReadonlyMap<string, GoldEntry>): void {
  const rows: [string, string, GoldEntry][] = [];
  for (const [k, entry] of entries) {
    const split = k.indexOf('\u0000');
    rows.push([k.slice(0, split), k.slice(split + 1), entry]);
  }
  const payload = JSON.stringify({ version: GOLD_CACHE_VERSION, fingerprint, entries: rows });
  writePrivateFile(dirname(path), basename(path), `${mac(key, payload)}\n${payload}`);
}
