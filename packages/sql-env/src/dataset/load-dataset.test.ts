import { mkdtemp, mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError, ErrorCode } from '@sqlenv/shared';
import { SqlExecutor } from '../sandbox/index.ts';
import { tinyQuestions, writeTinySpider } from '../testing/tiny-spider.ts';
import { loadDataset } from './load-dataset.ts';

/** An executor that counts the queries it was asked to run (to see the gold cache work). */
class CountingExecutor extends SqlExecutor {
  calls = 0;
  override query(...args: Parameters<SqlExecutor['query']>): ReturnType<SqlExecutor['query']> {
    this.calls += 1;
    return super.query(...args);
  }
}

let executor: CountingExecutor;
let scratch: string;

beforeAll(async () => {
  executor = new CountingExecutor({ poolSize: 2 });
  scratch = await mkdtemp(join(tmpdir(), 'sqlenv-load-'));
});
afterAll(async () => {
  await executor.close();
  await rm(scratch, { recursive: true, force: true });
});

async function expectDatasetError(promise: Promise<unknown>, fragment: RegExp): Promise<void> {
  const error = await promise.then(() => undefined, (e: unknown) => e);
  expect(error).toBeInstanceOf(AppError);
  expect((error as AppError).code).toBe(ErrorCode.DATASET);
  expect((error as AppError).message).toMatch(fragment);
}

describe('loadDataset on a Spider-layout directory', () => {
  it('precomputes gold answers and derives types, tables and difficulty', async () => {
    const dir = await writeTinySpider({ missingDatabase: true });
    const dataset = await loadDataset(dir, { executor, cacheDir: join(scratch, 'a'), skipMissingDbs: true });
    expect(dataset.splits).toEqual(['train', 'dev']);
    expect(dataset.defaultSplit).toBe('train');
    expect(dataset.questions.map((q) => q.question_id)).toEqual(['shop_train_0', 'shop_train_1', 'shop_train_2', 'shop_train_3', 'shop_train_6', 'shop_train_7', 'music_dev_0']);

    const count = dataset.question('shop_train_0');
    expect(count).toMatchObject({ gold_answer: '50', answer_type: 'integer', tables_involved: ['singer'], difficulty: 'easy', split: 'train' });
    const list = dataset.question('shop_train_1');
    expect(list?.answer_type).toBe('list');
    expect(list?.gold_rows).toHaveLength(8);
    expect(dataset.question('shop_train_2')).toMatchObject({ answer_type: 'table', tables_involved: ['Order Items'], gold_columns: ['select', 'qty'] });
    expect(dataset.question('shop_train_6')).toMatchObject({ answer_type: 'float', gold_answer: '43.5' });
    // Spider-style double-quoted strings: run as string literals, and stored in the form that runs here.
    expect(dataset.question('shop_train_7')).toMatchObject({ gold_sql: "SELECT name FROM singer WHERE country = 'Peru' AND age < 25", gold_answer: 'Singer 02, Singer 05' });
    expect(dataset.questionsOf('dev')).toHaveLength(1);
    expect(dataset.questionsOf('train', 'music')).toHaveLength(0);
    expect(dataset.questionsOf('train', 'unknown-db')).toHaveLength(0);

    const shop = dataset.databases.get('shop');
    expect(shop?.tables.map((t) => t.name).sort()).toEqual(['MixedCase', 'Order Items', 'select', 'singer']);
    expect(shop?.tables.find((t) => t.name === 'singer')?.rowCount).toBe(50);
    expect(dataset.databases.has('ghost')).toBe(false);
  });

  it('reports unplayable questions with reasons instead of dropping them silently', async () => {
    const dir = await writeTinySpider({ missingDatabase: true });
    const dataset = await loadDataset(dir, { executor, cacheDir: join(scratch, 'b'), skipMissingDbs: true });
    const reasons = Object.fromEntries(dataset.failures.map((f) => [f.question_id, f.reason]));
    expect(reasons).toEqual({ shop_train_4: 'sql_error', ghost_train_5: 'missing_database' });
    expect(dataset.failures.find((f) => f.question_id === 'shop_train_4')?.message).toMatch(/no such column/);
    expect(dataset.question('shop_train_4')).toBeUndefined();
    // An empty gold result stays playable: the expected answer is "none".
    expect(dataset.question('shop_train_3')).toMatchObject({ gold_rows: [], gold_answer: 'none' });
  });

  it('caches gold results: a second load runs no gold query', async () => {
    const dir = await writeTinySpider();
    const cacheDir = join(scratch, 'c');
    const first = await loadDataset(dir, { executor, cacheDir });
    expect((await readdir(cacheDir)).filter((f) => f.startsWith('gold-'))).toHaveLength(1);
    const before = executor.calls;
    const second = await loadDataset(dir, { executor, cacheDir });
    expect(executor.calls).toBe(before);
    expect(second.questions).toEqual(first.questions);
    expect(second.failures).toEqual(first.failures);

    // Changing a question file changes the fingerprint: the gold queries run again.
    await writeFile(join(dir, 'dev.json'), JSON.stringify([{ db_id: 'music', question: 'Album titles?', query: 'SELECT title FROM album' }]));
    const third = await loadDataset(dir, { executor, cacheDir });
    expect(executor.calls).toBeGreaterThan(before);
    expect(third.question('music_dev_0')?.gold_answer).toBe('Blue, Red');
    // The outdated file of this dataset is gone; another dataset's file in the same dir stays.
    const other = await writeTinySpider();
    await loadDataset(other, { executor, cacheDir });
    expect((await readdir(cacheDir)).filter((f) => f.startsWith('gold-'))).toHaveLength(2);
    await writeFile(join(dir, 'dev.json'), JSON.stringify([{ db_id: 'music', question: 'Album count?', query: 'SELECT count(*) FROM album' }]));
    await loadDataset(dir, { executor, cacheDir });
    expect((await readdir(cacheDir)).filter((f) => f.startsWith('gold-'))).toHaveLength(2);
  });

  it('reports a gold query that runs past goldTimeoutMs as a timeout and keeps it out of the cache', async () => {
    const dir = await writeTinySpider();
    const endless = 'WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n';
    await writeFile(join(dir, 'dev.json'), JSON.stringify([...tinyQuestions.dev, { db_id: 'music', question: 'Forever?', query: endless }]));
    const cacheDir = join(scratch, 'timeout');
    const dataset = await loadDataset(dir, { executor, cacheDir, goldTimeoutMs: 200 });
    const timedOut = dataset.failures.find((f) => f.question_id === 'music_dev_1');
    expect(timedOut).toMatchObject({ reason: 'timeout' });
    expect(timedOut?.message).toMatch(/timeout is 200 ms/);
    // Timeouts depend on the machine's load: the next load runs that query again (and only that one).
    const before = executor.calls;
    const again = await loadDataset(dir, { executor, cacheDir, goldTimeoutMs: 200 });
    expect(executor.calls - before).toBe(1);
    expect(again.failures.find((f) => f.question_id === 'music_dev_1')).toMatchObject({ reason: 'timeout' });
  });

  it('ignores a corrupt cache file and recomputes', async () => {
    const dir = await writeTinySpider();
    const cacheDir = join(scratch, 'd');
    await loadDataset(dir, { executor, cacheDir });
    const [file] = (await readdir(cacheDir)).filter((f) => f.startsWith('gold-'));
    await writeFile(join(cacheDir, file as string), '{"version": 1, "fing');
    const before = executor.calls;
    const dataset = await loadDataset(dir, { executor, cacheDir });
    expect(executor.calls).toBeGreaterThan(before);
    expect(dataset.questions).toHaveLength(7);
  });
});

describe('loadDataset on malformed directories', () => {
  it('names the missing directory, folder or files', async () => {
    await expectDatasetError(loadDataset(join(scratch, 'nope'), { executor, cacheDir: scratch }), /nope: dataset directory does not exist/);
    const empty = join(scratch, 'empty');
    await mkdir(empty, { recursive: true });
    await expectDatasetError(loadDataset(empty, { executor, cacheDir: scratch }), /missing the database\/ folder/);
    await mkdir(join(empty, 'database'));
    await expectDatasetError(loadDataset(empty, { executor, cacheDir: scratch }), /no question file \(expected one of train_spider.json/);
  });

  it('names the file and the problem for bad JSON and bad records', async () => {
    const dir = await writeTinySpider();
    await writeFile(join(dir, 'train_spider.json'), '[{"db_id": "shop",');
    await expectDatasetError(loadDataset(dir, { executor, cacheDir: scratch }), /train_spider\.json: invalid JSON/);
    await writeFile(join(dir, 'train_spider.json'), JSON.stringify([{ db_id: 'shop', question: 'q' }]));
    await expectDatasetError(loadDataset(dir, { executor, cacheDir: scratch }), /train_spider\.json: unexpected content: 0\.query/);
  });

  it('refuses a database file that is missing or empty, naming each, unless asked to skip them', async () => {
    const dir = await writeTinySpider({ missingDatabase: true });
    const cacheDir = join(scratch, 'missing');
    await expectDatasetError(loadDataset(dir, { executor, cacheDir }), /1 database file\(s\) missing or empty: ghost \(\S+ghost\.sqlite does not exist; 1 question\)\. .*--skip-missing-dbs/);
    // A 0-byte file opens in SQLite as a database without tables: as good as missing.
    await writeFile(join(dir, 'database', 'music', 'music.sqlite'), '');
    await expectDatasetError(loadDataset(dir, { executor, cacheDir }), /2 database file\(s\) missing or empty: .*music \(\S+music\.sqlite is empty \(0 bytes\); 1 question\)/);
    const dataset = await loadDataset(dir, { executor, cacheDir, skipMissingDbs: true });
    expect(dataset.skippedDatabases.map((s) => [s.db_id, s.questions])).toEqual([['ghost', 1], ['music', 1]]);
    expect(dataset.skippedDatabases[1]?.reason).toMatch(/is empty \(0 bytes\)/);
    expect(dataset.splits).toEqual(['train']);
  });

  it('fails when no question is playable', async () => {
    const dir = await writeTinySpider();
    await writeFile(join(dir, 'train_spider.json'), JSON.stringify([{ db_id: 'shop', question: 'q', query: 'SELECT nope FROM singer' }]));
    await rm(join(dir, 'dev.json'));
    await expectDatasetError(loadDataset(dir, { executor, cacheDir: scratch }), /no playable question/);
  });
});

describe('loadDataset builtin', () => {
  it('generates the builtin dataset into the cache dir and loads it', async () => {
    const cacheDir = join(scratch, 'builtin');
    const dataset = await loadDataset('builtin', { executor, cacheDir });
    expect(dataset.name).toBe('builtin');
    expect(dataset.questions.length).toBeGreaterThan(20);
    expect(dataset.splits).toContain('train');
    for (const q of dataset.questions) {
      expect(q.question_id).toBe(`${q.database_name}_${q.split}_${q.question_id.split('_').at(-1)}`);
      expect(q.tables_involved.length).toBeGreaterThan(0);
      expect(q.gold_answer).not.toBe('');
    }
    const again = await loadDataset('builtin', { executor, cacheDir });
    expect(again.questions).toEqual(dataset.questions);
  });
});

const spiderDir = process.env['SPIDER_DIR'];
describe.runIf(spiderDir !== undefined && spiderDir !== '')('loadDataset on the shared Spider subset (SPIDER_DIR)', () => {
  it('loads all 2,253 questions as playable (46 with an empty gold result, answered "none"); the second load is served from the cache', async () => {
    const cacheDir = join(scratch, 'spider');
    // The slowest gold queries (flight_4's joins over 67k routes) take about a second alone and went
    // past the 5 s default on a machine loaded by the rest of the suite: the limit is what this test
    // is not about, so it gets room; the timeout itself is tested on the tiny dataset above.
    const loadOptions = { executor, cacheDir, goldTimeoutMs: 120_000 };
    const dataset = await loadDataset(spiderDir as string, loadOptions);
    expect(dataset.failures).toEqual([]);
    expect(dataset.questions).toHaveLength(2253);
    expect(dataset.questions.filter((q) => q.gold_rows.length === 0)).toHaveLength(46);
    expect(dataset.databases.size).toBe(23);
    expect(dataset.splits).toEqual(['train']);
    const first = dataset.question('flight_1_train_0');
    expect(first?.question_id).toBe('flight_1_train_0');
    for (const q of dataset.questions) expect(q.tables_involved.length).toBeGreaterThan(0);

    const before = executor.calls;
    const again = await loadDataset(spiderDir as string, loadOptions);
    expect(executor.calls).toBe(before);
    expect(again.questions).toHaveLength(dataset.questions.length);
  });
});
