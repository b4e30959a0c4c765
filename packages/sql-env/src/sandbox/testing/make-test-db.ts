import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';

/**
 * Test helper: a temp dir with a small SQLite database whose names exercise
 * quoting (spaces, mixed case, a reserved word). Tables:
 *   singer(singer_id INTEGER PRIMARY KEY, name TEXT, age INT, photo BLOB)  — 5 rows
 *   "Concert Hall"("Hall Id" INTEGER, "Select" TEXT, PRIMARY KEY("Hall Id")) — 3 rows
 *   empty(x)                                                               — 0 rows
 */
export function makeTestDb(prefix = 'sql-sandbox-'): { dir: string; dbPath: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const dbPath = join(dir, 'test.sqlite');
  const db = new Database(dbPath);
  db.exec(`
    CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT NOT NULL, age INT, photo BLOB);
    CREATE TABLE "Concert Hall" ("Hall Id" INTEGER, "Select" TEXT, PRIMARY KEY ("Hall Id"));
    CREATE TABLE empty (x);
  `);
  const insert = db.prepare('INSERT INTO singer (name, age, photo) VALUES (?, ?, ?)');
  const singers: [string, number | null][] = [['Joe Sharp', 52], ['Timbaland', 32], ['Justin Brown', 29], ['Rose White', 41], ['John Nizinik', null]];
  for (const [name, age] of singers) insert.run(name, age, Buffer.from([0, 255, name.length]));
  const hall = db.prepare('INSERT INTO "Concert Hall" ("Hall Id", "Select") VALUES (?, ?)');
  for (let i = 1; i <= 3; i += 1) hall.run(i, `hall ${i}`);
  db.close();
  return { dir, dbPath, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}
