import { rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqlExecutor } from '../sandbox/index.ts';
import { writeTinySpider } from '../testing/tiny-spider.ts';
import { checkDataset } from './check-dataset.ts';

let executor: SqlExecutor;
const cacheDir = join(tmpdir(), 'sqlenv-check-test-cache');
beforeAll(() => {
  executor = new SqlExecutor({ poolSize: 2 });
});
afterAll(async () => {
  await executor.close();
});

describe('checkDataset', () => {
  it('lists every problem of a directory: missing databases, tables.json mismatches, gold failures', async () => {
    const dir = await writeTinySpider({
      missingDatabase: true,
      tablesJson: [
        { db_id: 'shop', table_names_original: ['singer', 'order items', 'select', 'MixedCase'] },
        { db_id: 'music', table_names_original: ['album', 'track'] },
        { db_id: 'nowhere', table_names_original: ['x'] },
      ],
    });
    const report = await checkDataset(dir, { executor, cacheDir });
    expect(report.ok).toBe(false);
    expect(report).toMatchObject({ questions: 9, playable: 7, databases: 2, splits: ['train', 'dev'] });
    const summary = report.problems.map((p) => [p.kind, p.severity, p.db_id ?? '', p.question_id ?? '']);
    expect(summary).toEqual([
      ['missing_database', 'error', 'ghost', ''],
      ['tables_json_mismatch', 'error', 'music', ''],
      ['tables_json_mismatch', 'warning', 'nowhere', ''],
      ['gold_failure', 'error', 'shop', 'shop_train_4'],
      ['empty_gold', 'warning', 'shop', 'shop_train_3'],
    ]);
    expect(report.problems[1]?.message).toBe("tables.json entry 'music': listed but not in the database: track");
    await rm(dir, { recursive: true, force: true });
  });

  it('runs the gold queries once the structure is sound, with empty results as warnings', async () => {
    const dir = await writeTinySpider({ tablesJson: [{ db_id: 'shop', table_names_original: ['singer', 'Order Items', 'select', 'MixedCase'] }] });
    await writeFile(join(dir, 'train_spider.json'), JSON.stringify([
      { db_id: 'shop', question: 'How many?', query: 'SELECT count(*) FROM singer' },
      { db_id: 'shop', question: 'None?', query: 'SELECT name FROM singer WHERE age > 1000' },
      { db_id: 'shop', question: 'Broken?', query: 'SELECT nope FROM singer' },
    ]));
    const report = await checkDataset(dir, { executor, cacheDir });
    expect(report.problems.map((p) => [p.kind, p.severity, p.question_id])).toEqual([
      ['gold_failure', 'error', 'shop_train_2'],
      ['empty_gold', 'warning', 'shop_train_1'],
    ]);
    expect(report.problems[0]?.message).toMatch(/^sql_error: no such column: nope/);
    expect(report.ok).toBe(false);
    await writeFile(join(dir, 'train_spider.json'), JSON.stringify([{ db_id: 'shop', question: 'How many?', query: 'SELECT count(*) FROM singer' }]));
    expect((await checkDataset(dir, { executor, cacheDir })).ok).toBe(true);
    await rm(dir, { recursive: true, force: true });
  });

  it('reports gold values too long to verify exactly, or to submit, as unplayable with the reason', async () => {
    const dir = await writeTinySpider();
    const rows = (count: number, chars: number): string =>
      `WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ${count}) SELECT i || replace(hex(zeroblob(${chars / 2})), '0', 'x') FROM c`;
    await writeFile(join(dir, 'train_spider.json'), JSON.stringify([
      { db_id: 'shop', question: 'Long cell?', query: "SELECT replace(hex(zeroblob(6000)), '0', 'x')" },
      { db_id: 'shop', question: 'Longest cell that fits?', query: "SELECT replace(hex(zeroblob(5000)), '0', 'x')" },
      { db_id: 'shop', question: 'Long answer?', query: rows(12, 9_000) },
      { db_id: 'shop', question: 'Long answer that fits?', query: rows(10, 9_000) },
    ]));
    const report = await checkDataset(dir, { executor, cacheDir });
    expect(report.problems.map((p) => [p.kind, p.severity, p.question_id])).toEqual([
      ['gold_failure', 'error', 'shop_train_0'],
      ['gold_failure', 'error', 'shop_train_2'],
    ]);
    expect(report.problems[0]?.message).toBe('cell_too_long: a gold cell is longer than the 10000 characters the executor returns (maxCellChars); a cut value cannot be verified exactly');
    expect(report.problems[1]?.message).toMatch(/^answer_too_long: the answer is 108\d{3} characters long, more than an action may carry \(100000\)$/);
    expect(report.playable).toBe(3);
    await rm(dir, { recursive: true, force: true });
  });

  it('reports malformed files and missing directories instead of throwing', async () => {
    expect((await checkDataset(join(tmpdir(), 'sqlenv-no-such-dir'), { executor })).problems).toEqual([
      expect.objectContaining({ kind: 'missing_directory', severity: 'error' }),
    ]);
    const dir = await writeTinySpider();
    await writeFile(join(dir, 'dev.json'), '{not json');
    await writeFile(join(dir, 'tables.json'), JSON.stringify({ db_id: 'shop' }));
    const report = await checkDataset(dir, { executor, cacheDir });
    expect(report.ok).toBe(false);
    const bad = report.problems.filter((p) => p.kind === 'bad_file');
    expect(bad.map((p) => p.file?.split(/[\\/]/).at(-1))).toEqual(['dev.json', 'tables.json']);
    expect(bad[0]?.message).toMatch(/dev\.json: invalid JSON/);
    await rm(dir, { recursive: true, force: true });
  });

  it('starts and closes its own executor when given none', async () => {
    const dir = await writeTinySpider();
    await writeFile(join(dir, 'train_spider.json'), JSON.stringify([{ db_id: 'shop', question: 'How many?', query: 'SELECT count(*) FROM singer' }]));
    const report = await checkDataset(dir, { cacheDir });
    expect(report).toMatchObject({ ok: true, playable: 2, problems: [] });
    await rm(dir, { recursive: true, force: true });
  });
});
