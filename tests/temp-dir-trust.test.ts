/**
 * The executor child's bundle under the shared temporary directory, attacked
 * the ways another local user could: a directory created first (their own, or
 * world-writable) holding their code under the bundle's name, a bundle edited
 * after it was written, a symlink at the bundle's path. Each run is a fresh
 * process (one-query.ts) whose TMPDIR is a scratch directory; "their code"
 * writes a marker file when executed, so the test sees whether it ran.
 */
import { execFile } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTestDb } from '@sqlenv/sql-env/testing';

const FIXTURE = new URL('../packages/sql-env/src/sandbox/testing/one-query.ts', import.meta.url).pathname;
/** A uid that is not ours (nobody), for planting a directory as "another user" when the tests run as root. */
const OTHER_UID = 65534;
const isRoot = process.getuid?.() === 0;

interface RunOutput {
  rows?: unknown[][];
  bundled?: boolean;
  module?: string;
  fallbackReason?: string | null;
  error?: string;
}

let scratch: string;
let db: ReturnType<typeof makeTestDb>;
/** Where the bundle lands under a TMPDIR, relative to it (learnt from a clean run). */
let bundleRelative: string;

/** Run one query in a fresh process whose temporary directory is `tmp`. */
function runOnce(tmp: string): Promise<RunOutput> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['--import', 'tsx', FIXTURE, db.dbPath], { env: { ...process.env, TMPDIR: tmp }, timeout: 60_000 }, (error, stdout, stderr) => {
      const line = stdout.trim().split('\n').pop() ?? '';
      try {
        resolve(JSON.parse(line) as RunOutput);
      } catch {
        reject(new Error(`one-query.ts printed no result (${error?.message ?? 'exit 0'}): ${stderr.slice(-2_000)}`));
      }
    });
  });
}

/** Code that leaves `marker` behind if it is ever executed. */
function plantedCode(marker: string): string {
  return `import { writeFileSync } from 'node:fs';\nwriteFileSync(${JSON.stringify(marker)}, 'executed');\n`;
}

function freshTmp(name: string): string {
  const dir = join(scratch, name);
  mkdirSync(dir);
  return dir;
}

beforeAll(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'sqlenv-tmp-trust-'));
  db = makeTestDb('sqlenv-tmp-trust-db-');
  const clean = freshTmp('clean');
  const first = await runOnce(clean);
  expect(first.rows).toEqual([[5]]);
  expect(first.bundled).toBe(true);
  bundleRelative = relative(clean, first.module as string);
}, 120_000);

afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
  db.cleanup();
});

describe('the executor child bundle in a shared temporary directory', () => {
  it('is kept in a private directory of this user, created 0700', () => {
    const privateDir = join(scratch, 'clean', dirname(bundleRelative));
    expect(readdirSync(join(scratch, 'clean'))).toContain(dirname(bundleRelative));
    expect(statSync(privateDir).mode & 0o777).toBe(0o700);
  });

  it('never runs code from a world-writable directory that someone created first under its name', async () => {
    const tmp = freshTmp('world-writable');
    const marker = join(scratch, 'world-writable.marker');
    const planted = join(tmp, bundleRelative);
    mkdirSync(dirname(planted), { recursive: true });
    chmodSync(dirname(planted), 0o777);
    writeFileSync(planted, plantedCode(marker));
    const run = await runOnce(tmp);
    expect(existsSync(marker)).toBe(false);
    expect(run.rows).toEqual([[5]]);
    expect(run.bundled).toBe(false);
    expect(run.fallbackReason).toMatch(/writable by group or others/);
  }, 60_000);

  it.skipIf(!isRoot)('never runs code from a directory another user owns under its name', async () => {
    const tmp = freshTmp('other-owner');
    const marker = join(scratch, 'other-owner.marker');
    const planted = join(tmp, bundleRelative);
    mkdirSync(dirname(planted), { recursive: true, mode: 0o755 });
    writeFileSync(planted, plantedCode(marker));
    chownSync(planted, OTHER_UID, OTHER_UID);
    chownSync(dirname(planted), OTHER_UID, OTHER_UID);
    const run = await runOnce(tmp);
    expect(existsSync(marker)).toBe(false);
    expect(run.rows).toEqual([[5]]);
    expect(run.bundled).toBe(false);
    expect(run.fallbackReason).toMatch(new RegExp(`owned by uid ${OTHER_UID}`));
  }, 60_000);

  it('detects a bundle edited after it was written, rewrites it and never runs the edit', async () => {
    const tmp = freshTmp('tampered');
    expect((await runOnce(tmp)).rows).toEqual([[5]]);
    const bundle = join(tmp, bundleRelative);
    const marker = join(scratch, 'tampered.marker');
    const original = readFileSync(bundle, 'utf8');
    writeFileSync(bundle, plantedCode(marker));
    const run = await runOnce(tmp);
    expect(existsSync(marker)).toBe(false);
    expect(run.rows).toEqual([[5]]);
    expect(run.bundled).toBe(true);
    expect(readFileSync(bundle, 'utf8')).toBe(original);
  }, 60_000);

  it('replaces a symlink planted at the bundle path without writing through it or running its target', async () => {
    const tmp = freshTmp('symlink');
    expect((await runOnce(tmp)).rows).toEqual([[5]]);
    const bundle = join(tmp, bundleRelative);
    const marker = join(scratch, 'symlink.marker');
    const victim = join(scratch, 'victim.mjs');
    writeFileSync(victim, plantedCode(marker));
    unlinkSync(bundle);
    symlinkSync(victim, bundle);
    const run = await runOnce(tmp);
    expect(existsSync(marker)).toBe(false);
    expect(run.rows).toEqual([[5]]);
    expect(readFileSync(victim, 'utf8')).toBe(plantedCode(marker));
  }, 60_000);
});
