import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '@sqlenv/cli';
import { silentLogger } from '@sqlenv/shared';

/**
 * Hostile and careless dataset directories (docs/security.md, "Datasets"): a db_id that climbs out
 * of the dataset, a database directory that is a symlink to somewhere else, and database files that
 * are missing or empty. Real files on disk, the real `sqlenv` entry point (in this process):
 * `datasets check` must say why it refuses, and `play`, `eval` and `serve` must not open anything
 * outside the dataset, nor run on fewer databases than the dataset names unless asked to.
 */
const SECRET = 'the-secret-row-7f3a';
let root: string;

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

async function sqlenv(argv: string[]): Promise<Result> {
  let stdout = '';
  let stderr = '';
  const out = new Writable({ write: (chunk: Buffer, _e, done) => ((stdout += chunk.toString()), done()) });
  const err = new Writable({ write: (chunk: Buffer, _e, done) => ((stderr += chunk.toString()), done()) });
  const code = await main(argv, { stdout: out, stderr: err as unknown as NodeJS.WriteStream, logger: silentLogger });
  return { code, stdout, stderr };
}

/** A SQLite file with one table `secret` whose row nobody should be served. */
function writeSecretDatabase(path: string): void {
  const db = new Database(path);
  db.exec(`CREATE TABLE secret (value TEXT); INSERT INTO secret VALUES ('${SECRET}');`);
  db.close();
}

/** A playable database of the dataset's own. */
function writeGoodDatabase(dir: string, dbId: string): void {
  const db = new Database(join(dir, 'database', dbId, `${dbId}.sqlite`));
  db.exec("CREATE TABLE singer (name TEXT); INSERT INTO singer VALUES ('Ann'), ('Bo');");
  db.close();
}

/** A Spider-layout directory with a good database and questions on `dbIds` (tables.json lists them too). */
async function writeDataset(name: string, dbIds: readonly string[], options: { good?: boolean } = {}): Promise<string> {
  const dir = join(root, name);
  await mkdir(join(dir, 'database', 'good'), { recursive: true });
  if (options.good !== false) writeGoodDatabase(dir, 'good');
  const questions = [
    ...(options.good === false ? [] : [{ db_id: 'good', question: 'How many singers?', query: 'SELECT count(*) FROM singer' }]),
    ...dbIds.map((dbId) => ({ db_id: dbId, question: 'What is the secret?', query: 'SELECT value FROM secret' })),
  ];
  await writeFile(join(dir, 'dev.json'), JSON.stringify(questions));
  await writeFile(join(dir, 'tables.json'), JSON.stringify(dbIds.map((dbId) => ({ db_id: dbId, table_names_original: ['secret'] }))));
  return dir;
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'sqlenv-adversarial-datasets-'));
  process.env['SQLENV_CACHE_DIR'] = join(root, 'cache');
});

afterAll(async () => {
  delete process.env['SQLENV_CACHE_DIR'];
  await rm(root, { recursive: true, force: true });
});

describe('a db_id that climbs out of the dataset', () => {
  const dbId = '../../other/evil';
  let dir: string;

  beforeAll(async () => {
    dir = await writeDataset('traversal', [dbId]);
    // Where database/<db_id>/<db_id>.sqlite lands for this db_id: <root>/other/evil.sqlite.
    await mkdir(join(root, 'other', 'evil'), { recursive: true });
    writeSecretDatabase(join(dir, 'database', dbId, `${dbId}.sqlite`));
  });

  it('datasets check refuses it and says why, exit 1', async () => {
    const text = await sqlenv(['datasets', 'check', dir]);
    expect(text.code).toBe(1);
    expect(text.stdout).toMatch(/^PROBLEMS: /);
    expect(text.stdout).toContain('[unsafe_path]');
    expect(text.stdout).toContain('db_id "../../other/evil" is not a plain name: it contains a path separator');
    const json = await sqlenv(['datasets', 'check', dir, '--json']);
    const report = JSON.parse(json.stdout) as { ok: boolean; playable: number; problems: Array<{ kind: string; severity: string; db_id?: string; file?: string }> };
    expect(report.ok).toBe(false);
    // Refused before any gold query: nothing of the outside file was read.
    expect(report.playable).toBe(0);
    const unsafe = report.problems.filter((p) => p.kind === 'unsafe_path');
    expect(unsafe.map((p) => [p.severity, p.db_id])).toEqual([
      ['error', dbId],
      ['error', dbId],
    ]);
    expect(unsafe.map((p) => p.file?.split(/[\\/]/).at(-1))).toEqual(['evil.sqlite', 'tables.json']);
  });

  it('play, eval and serve refuse to load the dataset, naming the question file and the db_id', async () => {
    const actions = join(root, 'sample-secret.jsonl');
    await writeFile(actions, `${JSON.stringify({ action_type: 'SAMPLE', argument: 'secret' })}\n`);
    for (const argv of [
      ['play', '--dataset', dir, '--actions', actions, '--json'],
      ['eval', '--dataset', dir, '--policy', 'oracle', '--episodes', 'all'],
      ['serve', '--dataset', dir, '--port', '0', '--log-level', 'silent'],
    ]) {
      const result = await sqlenv(argv);
      expect(result.code, `${argv[0]}: ${result.stderr}`).toBe(1);
      expect(result.stderr, argv[0]).toMatch(/UNSAFE_PATH: \S+dev\.json: db_id "\.\.\/\.\.\/other\/evil" is not a plain name: it contains a path separator/);
      expect(result.stdout + result.stderr).not.toContain(SECRET);
    }
  });

  it.each([
    ['..', "it contains '..'"],
    ['a\\b', 'it contains a path separator'],
    ['nul\u0000byte', 'it contains a NUL character'],
  ])('refuses the db_id %j: %s', async (badId, reason) => {
    const bad = await writeDataset(`bad-${Buffer.from(badId).toString('hex')}`, [badId]);
    const check = JSON.parse((await sqlenv(['datasets', 'check', bad, '--json'])).stdout) as { ok: boolean; problems: Array<{ kind: string; message: string }> };
    expect(check.ok).toBe(false);
    expect(check.problems.filter((p) => p.kind === 'unsafe_path').map((p) => p.message)).toEqual(expect.arrayContaining([expect.stringContaining(reason)]));
    const played = await sqlenv(['eval', '--dataset', bad, '--policy', 'oracle', '--episodes', 'all']);
    expect(played.code).toBe(1);
    expect(played.stderr).toContain(`is not a plain name: ${reason}`);
  });
});

describe('a database directory that is a symlink to outside the dataset', () => {
  let dir: string;

  beforeAll(async () => {
    dir = await writeDataset('symlinked', ['linked']);
    const outside = join(root, 'outside-db');
    await mkdir(outside, { recursive: true });
    writeSecretDatabase(join(outside, 'linked.sqlite'));
    await symlink(outside, join(dir, 'database', 'linked'), 'dir');
  });

  it('datasets check reports where it resolves, exit 1', async () => {
    const result = await sqlenv(['datasets', 'check', dir]);
    expect(result.code).toBe(1);
    expect(result.stdout).toContain('[unsafe_path]');
    expect(result.stdout).toMatch(/linked\.sqlite resolves to \S+outside-db\/linked\.sqlite, outside the dataset directory/);
  });

  it('play and eval refuse it without serving a row of it', async () => {
    const actions = join(root, 'sample-linked.jsonl');
    await writeFile(actions, `${JSON.stringify({ action_type: 'SAMPLE', argument: 'secret' })}\n`);
    for (const argv of [
      ['play', '--dataset', dir, '--actions', actions, '--json'],
      ['eval', '--dataset', dir, '--policy', 'oracle', '--episodes', 'all'],
    ]) {
      const result = await sqlenv(argv);
      expect(result.code, argv[0]).toBe(1);
      expect(result.stderr).toMatch(/UNSAFE_PATH: .*outside the dataset directory/);
      expect(result.stdout + result.stderr).not.toContain(SECRET);
    }
  });

  it('a symlinked database file counts too; a symlink that stays inside, or a symlinked dataset directory, is fine', async () => {
    const fileLink = await writeDataset('symlinked-file', ['filelink']);
    await mkdir(join(fileLink, 'database', 'filelink'), { recursive: true });
    writeSecretDatabase(join(root, 'outside.sqlite'));
    await symlink(join(root, 'outside.sqlite'), join(fileLink, 'database', 'filelink', 'filelink.sqlite'));
    expect((await sqlenv(['eval', '--dataset', fileLink, '--policy', 'oracle', '--episodes', 'all'])).stderr).toMatch(/filelink\.sqlite resolves to .*outside the dataset directory/);

    const inside = await writeDataset('symlinked-inside', [], { good: true });
    await mkdir(join(inside, 'database', 'alias'), { recursive: true });
    await symlink(join(inside, 'database', 'good', 'good.sqlite'), join(inside, 'database', 'alias', 'alias.sqlite'));
    await writeFile(join(inside, 'dev.json'), JSON.stringify([{ db_id: 'alias', question: 'How many singers?', query: 'SELECT count(*) FROM singer' }]));
    const ok = await sqlenv(['eval', '--dataset', inside, '--policy', 'oracle', '--episodes', 'all', '--json']);
    expect(ok.code, ok.stderr).toBe(0);
    expect(JSON.parse(ok.stdout.trim().split('\n').at(-1) ?? '{}')).toMatchObject({ episodes: 1, success_rate: 1 });
    // The dataset directory itself may be a symlink: its real path is the boundary.
    await symlink(inside, join(root, 'dataset-link'), 'dir');
    const viaLink = await sqlenv(['eval', '--dataset', join(root, 'dataset-link'), '--policy', 'oracle', '--episodes', 'all', '--json']);
    expect(viaLink.code, viaLink.stderr).toBe(0);
  });
});

describe('database files that are missing or empty', () => {
  let dir: string;

  beforeAll(async () => {
    dir = await writeDataset('missing', []);
    await mkdir(join(dir, 'database', 'hollow'), { recursive: true });
    await writeFile(join(dir, 'database', 'hollow', 'hollow.sqlite'), '');
    await writeFile(
      join(dir, 'dev.json'),
      JSON.stringify([
        { db_id: 'good', question: 'How many singers?', query: 'SELECT count(*) FROM singer' },
        { db_id: 'ghost', question: 'Where is it?', query: 'SELECT 1' },
        { db_id: 'hollow', question: 'Anything?', query: 'SELECT 1' },
        { db_id: 'hollow', question: 'Anything else?', query: 'SELECT 2' },
      ]),
    );
  });

  it('eval --episodes all refuses the dataset, naming each missing or empty file', async () => {
    const result = await sqlenv(['eval', '--dataset', dir, '--policy', 'oracle', '--episodes', 'all']);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/DATASET: \S+: 2 database file\(s\) missing or empty: ghost \(\S+ghost\.sqlite does not exist; 1 question\), hollow \(\S+hollow\.sqlite is empty \(0 bytes\); 2 questions\)\. .*--skip-missing-dbs/);
    const check = await sqlenv(['datasets', 'check', dir]);
    expect(check.code).toBe(1);
    expect(check.stdout).toMatch(/\[missing_database\] .*hollow.sqlite hollow: questions refer to db_id 'hollow' but \S+ is empty \(0 bytes\)/);
  });

  it('with --skip-missing-dbs (or SQLENV_SKIP_MISSING_DBS=1) it plays the rest and prints what it skipped', async () => {
    const flagged = await sqlenv(['eval', '--dataset', dir, '--policy', 'oracle', '--episodes', 'all', '--json', '--skip-missing-dbs']);
    expect(flagged.code, flagged.stderr).toBe(0);
    expect(flagged.stderr).toMatch(/^skipped database ghost: \S+ghost\.sqlite does not exist \(1 question left out\)$/m);
    expect(flagged.stderr).toMatch(/^skipped database hollow: \S+hollow\.sqlite is empty \(0 bytes\) \(2 questions left out\)$/m);
    expect(JSON.parse(flagged.stdout.trim().split('\n').at(-1) ?? '{}')).toMatchObject({ episodes: 1 });

    process.env['SQLENV_SKIP_MISSING_DBS'] = '1';
    try {
      const viaEnv = await sqlenv(['eval', '--dataset', dir, '--policy', 'oracle', '--episodes', 'all', '--json']);
      expect(viaEnv.code, viaEnv.stderr).toBe(0);
      expect(viaEnv.stderr).toContain('skipped database ghost');
      process.env['SQLENV_SKIP_MISSING_DBS'] = 'maybe';
      const bad = await sqlenv(['eval', '--dataset', dir, '--policy', 'oracle', '--episodes', 'all']);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain('SQLENV_SKIP_MISSING_DBS');
    } finally {
      delete process.env['SQLENV_SKIP_MISSING_DBS'];
    }
  });
});
