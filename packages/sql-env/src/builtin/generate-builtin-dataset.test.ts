import { createHash } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answerTypes, type Cell } from '@sqlenv/protocol';
import { deriveAnswerType } from '../verifier/index.ts';
import { generateBuiltinDataset, type BuiltinDatasetSummary } from './generate-builtin-dataset.ts';
import type { SpiderTablesEntry } from './tables-json.ts';
import { FIRST_NAMES, LAST_NAMES } from './vocabulary.ts';

interface SpiderQuestion {
  db_id: string;
  question: string;
  query: string;
}

let scratch: string;
let dirA: string;
let dirB: string;
let dirOther: string;
let summary: BuiltinDatasetSummary;

async function readJson<T>(dir: string, file: string): Promise<T> {
  return JSON.parse(await readFile(join(dir, file), 'utf8')) as T;
}

function dbPath(dir: string, dbId: string): string {
  return join(dir, 'database', dbId, `${dbId}.sqlite`);
}

function openReadOnly(path: string): Database.Database {
  return new Database(path, { readonly: true, fileMustExist: true });
}

/** Every table's full contents in a fixed order, as one string. */
function dumpDatabase(path: string): string {
  const db = openReadOnly(path);
  try {
    const tables = db.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as { name: string; sql: string }[];
    return JSON.stringify(
      tables.map(({ name, sql }) => ({ sql, rows: db.prepare(`SELECT * FROM "${name.replaceAll('"', '""')}" ORDER BY rowid`).raw(true).all() })),
    );
  } finally {
    db.close();
  }
}

function runGold(dir: string, question: SpiderQuestion): { columns: string[]; rows: Cell[][]; readonly: boolean } {
  const db = openReadOnly(dbPath(dir, question.db_id));
  try {
    const statement = db.prepare(question.query);
    return { columns: statement.columns().map((c) => c.name), rows: statement.raw(true).all() as Cell[][], readonly: statement.readonly };
  } finally {
    db.close();
  }
}

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'sqlenv-builtin-'));
  dirA = join(scratch, 'a');
  dirB = join(scratch, 'b');
  dirOther = join(scratch, 'other');
  summary = await generateBuiltinDataset({ outDir: dirA });
  await generateBuiltinDataset({ outDir: dirB });
  await generateBuiltinDataset({ outDir: dirOther, seed: 7 });
});

afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

describe('generateBuiltinDataset determinism', () => {
  it('writes byte-identical JSON files for the same seed', async () => {
    for (const file of ['train_spider.json', 'dev.json', 'tables.json', 'builtin-manifest.json']) {
      expect(await readFile(join(dirB, file), 'utf8'), file).toBe(await readFile(join(dirA, file), 'utf8'));
    }
  });

  it('writes identical table contents for the same seed', () => {
    for (const { dbId } of summary.domains) {
      expect(dumpDatabase(dbPath(dirB, dbId)), dbId).toBe(dumpDatabase(dbPath(dirA, dbId)));
    }
  });

  it('writes different data and questions for a different seed', async () => {
    for (const { dbId } of summary.domains) {
      expect(dumpDatabase(dbPath(dirOther, dbId)), dbId).not.toBe(dumpDatabase(dbPath(dirA, dbId)));
    }
    expect(await readFile(join(dirOther, 'train_spider.json'), 'utf8')).not.toBe(await readFile(join(dirA, 'train_spider.json'), 'utf8'));
    // The schema does not depend on the seed.
    expect(await readFile(join(dirOther, 'tables.json'), 'utf8')).toBe(await readFile(join(dirA, 'tables.json'), 'utf8'));
  });
});

describe('generateBuiltinDataset layout', () => {
  it('has at least four domains with 3-6 tables of tens to hundreds of rows', () => {
    expect(summary.domains.length).toBeGreaterThanOrEqual(4);
    for (const domain of summary.domains) {
      expect(domain.tables.length, domain.dbId).toBeGreaterThanOrEqual(3);
      expect(domain.tables.length, domain.dbId).toBeLessThanOrEqual(6);
      for (const table of domain.tables) {
        expect(table.rows, `${domain.dbId}.${table.name}`).toBeGreaterThanOrEqual(8);
        expect(table.rows, `${domain.dbId}.${table.name}`).toBeLessThanOrEqual(1_000);
      }
    }
  });

  it('leaves only the .sqlite file per database, in rollback-journal (not WAL) mode', async () => {
    for (const { dbId } of summary.domains) {
      expect(await readdir(join(dirA, 'database', dbId))).toEqual([`${dbId}.sqlite`]);
      const header = await readFile(dbPath(dirA, dbId));
      // Bytes 18-19 of the header are the write/read format versions: 1 = legacy journal, 2 = WAL.
      expect([header[18], header[19]], dbId).toEqual([1, 1]);
    }
  });

  it('describes every real table and column in tables.json, with valid keys', async () => {
    const entries = await readJson<SpiderTablesEntry[]>(dirA, 'tables.json');
    expect(entries.map((e) => e.db_id)).toEqual(summary.domains.map((d) => d.dbId));
    for (const entry of entries) {
      const db = openReadOnly(dbPath(dirA, entry.db_id));
      try {
        const tables = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY rowid").pluck().all() as string[]);
        expect(entry.table_names_original).toEqual(tables);
        expect(entry.table_names).toHaveLength(tables.length);
        expect(entry.column_names_original[0]).toEqual([-1, '*']);
        expect(entry.column_names).toHaveLength(entry.column_names_original.length);
        expect(entry.column_types).toHaveLength(entry.column_names_original.length);
        const expectedColumns: [number, string][] = [[-1, '*']];
        const expectedPks: number[] = [];
        const expectedFks: [number, number][] = [];
        const indexOf = (table: string, column: string): number =>
          entry.column_names_original.findIndex(([t, c]) => entry.table_names_original[t] === table && c === column);
        tables.forEach((table, t) => {
          const info = db.pragma(`table_info("${table.replaceAll('"', '""')}")`) as { name: string; pk: number }[];
          for (const column of info) {
            expectedColumns.push([t, column.name]);
            if (column.pk > 0) expectedPks.push(expectedColumns.length - 1);
          }
        });
        for (const table of tables) {
          const fks = db.pragma(`foreign_key_list("${table.replaceAll('"', '""')}")`) as { table: string; from: string; to: string }[];
          for (const fk of fks) expectedFks.push([indexOf(table, fk.from), indexOf(fk.table, fk.to)]);
        }
        expect(entry.column_names_original).toEqual(expectedColumns);
        expect(entry.primary_keys).toEqual(expectedPks);
        expect([...entry.foreign_keys].sort()).toEqual(expectedFks.sort());
        expect(entry.foreign_keys.flat().every((i) => i > 0)).toBe(true);
        expect(new Set(entry.column_types).size).toBeGreaterThanOrEqual(2);
        for (const type of entry.column_types) expect(['text', 'number', 'time']).toContain(type);
      } finally {
        db.close();
      }
    }
  });

  it('uses identifiers that need quoting: a table name with a space, keyword and MixedCase columns', async () => {
    const entries = await readJson<SpiderTablesEntry[]>(dirA, 'tables.json');
    const tableNames = entries.flatMap((e) => e.table_names_original);
    const columnNames = entries.flatMap((e) => e.column_names_original.map(([, name]) => name));
    expect(tableNames.some((name) => name.includes(' '))).toBe(true);
    expect(columnNames.some((name) => ['order', 'group', 'select', 'where', 'from'].includes(name.toLowerCase()))).toBe(true);
    expect(columnNames.some((name) => /[a-z][A-Z]/.test(name))).toBe(true);
    const questions = await readJson<SpiderQuestion[]>(dirA, 'train_spider.json');
    expect(questions.some((q) => q.query.includes('"Order Items"') && q.query.includes('"order"'))).toBe(true);
  });
});

describe('generateBuiltinDataset questions', () => {
  it('has at least 200 questions, 60-100 per domain, split about 80/20 with no overlap', async () => {
    const train = await readJson<SpiderQuestion[]>(dirA, 'train_spider.json');
    const dev = await readJson<SpiderQuestion[]>(dirA, 'dev.json');
    expect(train.length + dev.length).toBeGreaterThanOrEqual(200);
    for (const domain of summary.domains) {
      const trainCount = train.filter((q) => q.db_id === domain.dbId).length;
      const devCount = dev.filter((q) => q.db_id === domain.dbId).length;
      expect({ train: trainCount, dev: devCount }).toEqual(domain.questions);
      expect(trainCount + devCount, domain.dbId).toBeGreaterThanOrEqual(60);
      expect(trainCount + devCount, domain.dbId).toBeLessThanOrEqual(100);
      expect(devCount / (trainCount + devCount), domain.dbId).toBeCloseTo(0.2, 1);
    }
    for (const q of [...train, ...dev]) expect(Object.keys(q).sort()).toEqual(['db_id', 'query', 'question']);
    const queries = new Set(train.map((q) => `${q.db_id}\n${q.query}`));
    expect(dev.filter((q) => queries.has(`${q.db_id}\n${q.query}`))).toEqual([]);
    expect(new Set([...train, ...dev].map((q) => `${q.db_id}\n${q.question}`)).size).toBe(train.length + dev.length);
  });

  it('has gold queries that run read-only and return non-empty results of every answer type', async () => {
    const questions = [...(await readJson<SpiderQuestion[]>(dirA, 'train_spider.json')), ...(await readJson<SpiderQuestion[]>(dirA, 'dev.json'))];
    const types = new Map<string, number>();
    for (const question of questions) {
      const gold = runGold(dirA, question);
      expect(gold.readonly, question.query).toBe(true);
      expect(gold.rows.length, question.query).toBeGreaterThan(0);
      expect(gold.rows.flat().includes(null), question.query).toBe(false);
      const type = deriveAnswerType(gold.columns, gold.rows);
      types.set(type, (types.get(type) ?? 0) + 1);
    }
    for (const type of answerTypes) expect(types.get(type) ?? 0, type).toBeGreaterThanOrEqual(10);
  });

  it('covers the SQL constructs agents must learn', async () => {
    const queries = [...(await readJson<SpiderQuestion[]>(dirA, 'train_spider.json')), ...(await readJson<SpiderQuestion[]>(dirA, 'dev.json'))].map((q) => q.query);
    const constructs: Record<string, RegExp> = {
      count: /COUNT\(/, avg: /AVG\(/, sum: /SUM\(/, max: /MAX\(/, min: /MIN\(/, join: / JOIN /, groupBy: /GROUP BY/, having: /HAVING/,
      orderLimit: /ORDER BY .* LIMIT \d/, notIn: /NOT IN \(SELECT/, scalarSubquery: /[<>] \(SELECT/, except: / EXCEPT /, intersect: / INTERSECT /,
      distinct: /SELECT DISTINCT/, isNull: /IS NULL/, fourTables: /(JOIN.*){3}/,
    };
    for (const [name, pattern] of Object.entries(constructs)) {
      expect(queries.filter((q) => pattern.test(q)).length, name).toBeGreaterThanOrEqual(2);
    }
  });

  it('rejects invalid options', async () => {
    await expect(generateBuiltinDataset({ outDir: join(scratch, 'bad'), seed: -1 })).rejects.toMatchObject({ code: 'VALIDATION' });
    await expect(generateBuiltinDataset({ outDir: '' })).rejects.toMatchObject({ code: 'VALIDATION' });
  });
});

describe('generateBuiltinDataset extra training draws', () => {
  it('adds train questions only, never one that is in dev, and leaves the standard dataset as it was', async () => {
    const dir = join(scratch, 'extra');
    const extra = await generateBuiltinDataset({ outDir: dir, extraTrainPerInstance: 3 });
    expect(extra.extraTrainPerInstance).toBe(3);
    for (const file of ['dev.json', 'tables.json']) expect(await readFile(join(dir, file), 'utf8'), file).toBe(await readFile(join(dirA, file), 'utf8'));
    for (const { dbId } of summary.domains) expect(dumpDatabase(dbPath(dir, dbId)), dbId).toBe(dumpDatabase(dbPath(dirA, dbId)));
    const standardTrain = await readJson<SpiderQuestion[]>(dirA, 'train_spider.json');
    const train = await readJson<SpiderQuestion[]>(dir, 'train_spider.json');
    const dev = await readJson<SpiderQuestion[]>(dirA, 'dev.json');
    // The standard train questions come first, unchanged; the extras follow.
    expect(train.slice(0, standardTrain.length)).toEqual(standardTrain);
    expect(train.length).toBeGreaterThan(standardTrain.length * 2);
    const devQueries = new Set(dev.map((q) => q.query));
    const devQuestions = new Set(dev.map((q) => `${q.db_id}\n${q.question}`));
    expect(train.filter((q) => devQueries.has(q.query) || devQuestions.has(`${q.db_id}\n${q.question}`))).toEqual([]);
    expect(new Set(train.map((q) => q.query)).size).toBe(train.length);
    for (const question of train.slice(standardTrain.length, standardTrain.length + 40)) {
      const gold = runGold(dir, question);
      expect(gold.rows.length, question.query).toBeGreaterThan(0);
    }
  });

  it('--extra-train-only: the extra draws alone, so neither split of the standard dataset is in it', async () => {
    const both = join(scratch, 'extra-both');
    const only = join(scratch, 'extra-only');
    await generateBuiltinDataset({ outDir: both, extraTrainPerInstance: 2 });
    const summaryOnly = await generateBuiltinDataset({ outDir: only, extraTrainPerInstance: 2, extraTrainOnly: true });
    const standardTrain = await readJson<SpiderQuestion[]>(dirA, 'train_spider.json');
    const trainBoth = await readJson<SpiderQuestion[]>(both, 'train_spider.json');
    const trainOnly = await readJson<SpiderQuestion[]>(only, 'train_spider.json');
    expect(trainOnly).toEqual(trainBoth.slice(standardTrain.length));
    const standardQueries = new Set(standardTrain.map((q) => q.query));
    expect(trainOnly.filter((q) => standardQueries.has(q.query))).toEqual([]);
    expect(await readFile(join(only, 'dev.json'), 'utf8')).toBe(await readFile(join(dirA, 'dev.json'), 'utf8'));
    expect(summaryOnly.extraTrainOnly).toBe(true);
    expect(summaryOnly.domains.reduce((n, d) => n + d.questions.train, 0)).toBe(trainOnly.length);
    await expect(generateBuiltinDataset({ outDir: join(scratch, 'bad-only'), extraTrainOnly: true })).rejects.toMatchObject({ code: 'VALIDATION' });
  });
});

describe('generateBuiltinDataset extra dev draws', () => {
  it('appends new dev questions of dev\'s templates, none in train, and leaves train and the databases as they were', async () => {
    const withTrain = join(scratch, 'extra-dev-train');
    const withDev = join(scratch, 'extra-dev');
    await generateBuiltinDataset({ outDir: withTrain, extraTrainPerInstance: 2 });
    const extraDev = await generateBuiltinDataset({ outDir: withDev, extraTrainPerInstance: 2, extraDevPerInstance: 3 });
    expect(extraDev.extraDevPerInstance).toBe(3);
    for (const file of ['train_spider.json', 'tables.json']) expect(await readFile(join(withDev, file), 'utf8'), file).toBe(await readFile(join(withTrain, file), 'utf8'));
    for (const { dbId } of summary.domains) expect(dumpDatabase(dbPath(withDev, dbId)), dbId).toBe(dumpDatabase(dbPath(dirA, dbId)));
    const standardDev = await readJson<SpiderQuestion[]>(dirA, 'dev.json');
    const dev = await readJson<SpiderQuestion[]>(withDev, 'dev.json');
    const train = await readJson<SpiderQuestion[]>(withDev, 'train_spider.json');
    // The standard dev questions first, unchanged; new ones after them, fewer than three per dev
    // question (parameterless templates have no other instance, small parameter spaces run out).
    expect(dev.slice(0, standardDev.length)).toEqual(standardDev);
    expect(dev.length).toBeGreaterThan(standardDev.length * 2.5);
    expect(dev.length).toBeLessThanOrEqual(standardDev.length * 4);
    expect(extraDev.domains.reduce((n, d) => n + d.questions.dev, 0)).toBe(dev.length);
    // Never a training question (by query or by text), never twice.
    const trainQueries = new Set(train.map((q) => q.query));
    const trainQuestions = new Set(train.map((q) => `${q.db_id}\n${q.question}`));
    expect(dev.filter((q) => trainQueries.has(q.query) || trainQuestions.has(`${q.db_id}\n${q.question}`))).toEqual([]);
    expect(new Set(dev.map((q) => q.query)).size).toBe(dev.length);
    for (const question of dev.slice(standardDev.length, standardDev.length + 40)) {
      const gold = runGold(withDev, question);
      expect(gold.rows.length, question.query).toBeGreaterThan(0);
    }
  });
});

describe('generateBuiltinDataset fresh values', () => {
  it('the standard dataset is byte for byte the one the shipped model was trained and evaluated on', async () => {
    // SHA-256 of generator version 1's files at the default seed: an option added to the generator
    // must not move a single byte of the standard train/dev split.
    const sha = async (file: string): Promise<string> => createHash('sha256').update(await readFile(join(dirA, file))).digest('hex');
    expect(await sha('train_spider.json')).toBe('a8c2c735048495e76dc006e030d1e2d60cd8929b4c4ad95d5f7f4638571ea9c7');
    expect(await sha('dev.json')).toBe('1075adaa3d5e670a412e907e1c062f89899fe5d738a8c262f9d5c003a21be002');
  });

  it('draws people, places and titles from synthetic pools made from the seed: new names for every seed, the same for the same seed, valid gold queries', async () => {
    const [one, again, two] = ['fresh-1', 'fresh-1b', 'fresh-2'].map((name) => join(scratch, name)) as [string, string, string];
    const summaryOne = await generateBuiltinDataset({ outDir: one, seed: 1, freshValues: true });
    await generateBuiltinDataset({ outDir: again, seed: 1, freshValues: true });
    await generateBuiltinDataset({ outDir: two, seed: 2, freshValues: true });
    expect(summaryOne.freshValues).toBe(true);
    expect(await readFile(join(again, 'train_spider.json'), 'utf8')).toBe(await readFile(join(one, 'train_spider.json'), 'utf8'));
    const customers = (dir: string): { FirstName: string; LastName: string; City: string }[] => {
      const db = openReadOnly(dbPath(dir, 'retail_shop'));
      try {
        return db.prepare('SELECT FirstName, LastName, City FROM Customers').all() as { FirstName: string; LastName: string; City: string }[];
      } finally {
        db.close();
      }
    };
    const standard = new Set<string>([...FIRST_NAMES, ...LAST_NAMES]);
    const names = (dir: string): Set<string> => new Set(customers(dir).flatMap((c) => [c.FirstName, c.LastName]));
    const namesOne = names(one);
    const namesTwo = names(two);
    expect([...namesOne].filter((n) => standard.has(n))).toEqual([]);
    // Two seeds share almost no names (pools of 1,000 first and 1,000 last names, made per seed).
    const shared = [...namesOne].filter((n) => namesTwo.has(n)).length;
    expect(shared / namesOne.size).toBeLessThan(0.05);
    expect(new Set(customers(one).map((c) => c.City)).size).toBeGreaterThan(10);
    const schema = await readFile(join(dirA, 'tables.json'), 'utf8');
    expect(await readFile(join(one, 'tables.json'), 'utf8')).toBe(schema);
    const train = await readJson<SpiderQuestion[]>(one, 'train_spider.json');
    const dev = await readJson<SpiderQuestion[]>(one, 'dev.json');
    expect(train.length + dev.length).toBeGreaterThan(250);
    for (const question of [...train, ...dev]) expect(runGold(one, question).rows.length, question.query).toBeGreaterThan(0);
  });
});
