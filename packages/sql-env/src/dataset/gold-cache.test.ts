import { chmodSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError, ErrorCode } from '@sqlenv/shared';
import { SqlExecutor } from '../sandbox/index.ts';
import { writeTinySpider } from '../testing/tiny-spider.ts';
import { verifyAnswer } from '../verifier/index.ts';
import { defaultCacheDir, loadDataset } from './load-dataset.ts';

/**
 * The gold cache attacked by whoever can write its files: an edited entry
 * must be detected and recomputed (a wrong ANSWER never scores), and a cache
 * directory others may write is refused outright.
 */

let executor: SqlExecutor;
let scratch: string;
let datasetDir: string;

beforeAll(async () => {
  executor = new SqlExecutor({ poolSize: 2, spareChildren: 0 });
  scratch = await mkdtemp(join(tmpdir(), 'sqlenv-gold-cache-'));
  datasetDir = await writeTinySpider();
});
afterAll(async () => {
  await executor.close();
  await rm(scratch, { recursive: true, force: true });
  await rm(datasetDir, { recursive: true, force: true });
});

function goldFiles(cacheDir: string): string[] {
  return readdirSync(cacheDir).filter((name) => name.startsWith('gold-'));
}

describe('the gold cache', () => {
  it('detects an edited entry and recomputes it: a wrong ANSWER does not score after the edit', async () => {
    const cacheDir = join(scratch, 'edited');
    const first = await loadDataset(datasetDir, { executor, cacheDir });
    const question = first.question('shop_train_0');
    expect(question?.gold_answer).toBe('50');
    const [file] = goldFiles(cacheDir);
    expect(file).toBeDefined();
    const path = join(cacheDir, file as string);
    const text = readFileSync(path, 'utf8');
    // The count(*) gold result is [[50]]: the attacker makes it 51 (and would answer 51).
    const edited = text.replace('"SELECT count(*) FROM singer",{"ok":true,"columns":["count(*)"],"rows":[[50]]', '"SELECT count(*) FROM singer",{"ok":true,"columns":["count(*)"],"rows":[[51]]');
    expect(edited).not.toBe(text);
    writeFileSync(path, edited);

    const second = await loadDataset(datasetDir, { executor, cacheDir });
    const reloaded = second.question('shop_train_0');
    expect(reloaded?.gold_answer).toBe('50');
    expect(verifyAnswer('51', reloaded as NonNullable<typeof reloaded>).correct).toBe(false);
    expect(verifyAnswer('50', reloaded as NonNullable<typeof reloaded>).correct).toBe(true);
    // Recomputed and written again: the next load reads an intact file.
    expect(readFileSync(join(cacheDir, goldFiles(cacheDir)[0] as string), 'utf8')).not.toContain('"rows":[[51]]');
  });

  it('keeps its key in a file of this user that nobody else may read (0600)', async () => {
    const cacheDir = join(scratch, 'keyed');
    await loadDataset(datasetDir, { executor, cacheDir });
    const key = join(cacheDir, 'gold.key');
    expect(statSync(key).mode & 0o777).toBe(0o600);
    expect(statSync(key).size).toBe(32);
  });

  it('refuses a cache directory that group or others may write', async () => {
    const cacheDir = join(scratch, 'world-writable');
    mkdirSync(cacheDir);
    chmodSync(cacheDir, 0o777);
    const error = await loadDataset(datasetDir, { executor, cacheDir }).then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe(ErrorCode.UNSAFE_PATH);
    expect((error as AppError).message).toMatch(/writable by group or others/);
  });

  it('defaults to a per-user directory in the temp dir, not a name shared by every user', () => {
    expect(defaultCacheDir().startsWith(tmpdir())).toBe(true);
    expect(defaultCacheDir()).toMatch(new RegExp(`-${process.getuid?.() ?? 'user'}$`));
  });
});
