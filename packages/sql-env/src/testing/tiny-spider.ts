import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';

/**
 * A small Spider-layout dataset for tests, written into a fresh temp dir:
 * names that need quoting (`Order Items`, `select`, `MixedCase`), a 50-row
 * table for row truncation, long text for the character cap, and questions
 * that must fail to load (empty result, bad SQL), and gold SQL with a
 * double-quoted string (Spider style). With `missingDatabase`, question 5 of
 * train refers to a database that does not exist (`ghost`): such a dataset
 * loads only with skipMissingDbs.
 */
export const tinyQuestions = {
  train: [
    { db_id: 'shop', question: 'How many singers are there?', query: 'SELECT count(*) FROM singer' },
    { db_id: 'shop', question: 'List the names of singers older than 60.', query: 'SELECT name FROM singer WHERE age > 60 ORDER BY name' },
    { db_id: 'shop', question: 'Which items were ordered more than once?', query: 'SELECT T1."select", T1.qty FROM "Order Items" AS T1 WHERE T1.qty > 1' },
    { db_id: 'shop', question: 'Singers older than 1000?', query: 'SELECT name FROM singer WHERE age > 1000' },
    { db_id: 'shop', question: 'A broken gold query', query: 'SELECT no_such_column FROM singer' },
    { db_id: 'ghost', question: 'A question on a missing database', query: 'SELECT 1' },
    { db_id: 'shop', question: 'What is the average age of singers from France?', query: "SELECT avg(age) FROM singer WHERE country = 'France'" },
    { db_id: 'shop', question: 'Which singers from Peru are younger than 25?', query: 'SELECT name FROM singer WHERE country = "Peru" AND age < 25' },
  ],
  dev: [{ db_id: 'music', question: 'How many albums are there?', query: 'SELECT count(*) FROM album' }],
};

export async function writeTinySpider(options: { tablesJson?: unknown; missingDatabase?: boolean } = {}): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'sqlenv-tiny-'));
  await mkdir(join(dir, 'database', 'shop'), { recursive: true });
  await mkdir(join(dir, 'database', 'music'), { recursive: true });

  const shop = new Database(join(dir, 'database', 'shop', 'shop.sqlite'));
  shop.exec(`
    CREATE TABLE singer (id INTEGER PRIMARY KEY, name TEXT, age INTEGER, country TEXT);
    CREATE TABLE "Order Items" (item_id INTEGER PRIMARY KEY, "select" TEXT, qty INTEGER);
    CREATE TABLE "select" (x INTEGER);
    CREATE TABLE MixedCase (Id INTEGER, Note TEXT);
  `);
  const countries = ['France', 'Japan', 'Peru'];
  const insertSinger = shop.prepare('INSERT INTO singer (id, name, age, country) VALUES (?, ?, ?, ?)');
  for (let i = 1; i <= 50; i += 1) insertSinger.run(i, `Singer ${String(i).padStart(2, '0')}`, 18 + i, countries[i % 3]);
  shop.exec(`INSERT INTO "Order Items" VALUES (1, 'guitar', 2), (2, 'drum', 1), (3, 'flute', 3)`);
  shop.exec('INSERT INTO "select" VALUES (7), (8)');
  const insertNote = shop.prepare('INSERT INTO MixedCase VALUES (?, ?)');
  for (let i = 1; i <= 10; i += 1) insertNote.run(i, `note ${i} `.padEnd(600, 'x'));
  shop.close();

  const music = new Database(join(dir, 'database', 'music', 'music.sqlite'));
  music.exec("CREATE TABLE album (id INTEGER PRIMARY KEY, title TEXT); INSERT INTO album VALUES (1, 'Blue'), (2, 'Red');");
  music.close();

  const train = options.missingDatabase === true ? tinyQuestions.train : tinyQuestions.train.filter((q) => q.db_id !== 'ghost');
  await writeFile(join(dir, 'train_spider.json'), JSON.stringify(train));
  await writeFile(join(dir, 'dev.json'), JSON.stringify(tinyQuestions.dev));
  if (options.tablesJson !== undefined) await writeFile(join(dir, 'tables.json'), JSON.stringify(options.tablesJson));
  return dir;
}
