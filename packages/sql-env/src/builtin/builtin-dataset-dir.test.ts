import { fork, type ChildProcess } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtinCacheName, builtinDatasetDir, readBuiltinManifest } from './builtin-dataset-dir.ts';
import { DEFAULT_BUILTIN_SEED } from './generate-builtin-dataset.ts';

const childScript = fileURLToPath(new URL('./testing/cache-child.ts', import.meta.url));

let scratch: string;

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'sqlenv-builtin-cache-'));
});

afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

interface ChildHandle {
  ready: Promise<void>;
  result: Promise<string>;
  go(): void;
}

function startChild(cacheDir: string): ChildHandle {
  const child: ChildProcess = fork(childScript, [cacheDir], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  let markReady: () => void = () => undefined;
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  const result = new Promise<string>((resolve, reject) => {
    child.on('message', (message: { ready?: boolean; dir?: string; error?: string }) => {
      if (message.ready === true) markReady();
      else if (message.dir !== undefined) resolve(message.dir);
      else reject(new Error(message.error));
    });
    child.on('exit', (code) => reject(new Error(`child exited with ${String(code)}: ${stderr}`)));
  });
  return { ready, result, go: () => child.send('go') };
}

describe('builtinDatasetDir', () => {
  it('generates once into a versioned directory and reuses it afterwards', async () => {
    const cacheDir = join(scratch, 'reuse');
    const dir = await builtinDatasetDir(cacheDir);
    expect(basename(dir)).toBe(builtinCacheName(DEFAULT_BUILTIN_SEED));
    expect((await readBuiltinManifest(dir)).seed).toBe(DEFAULT_BUILTIN_SEED);
    const trainMtimeMs = (await stat(join(dir, 'train_spider.json'))).mtimeMs;
    // A regeneration would replace the directory and lose this file.
    await writeFile(join(dir, 'marker'), 'kept');

    expect(await builtinDatasetDir(cacheDir)).toBe(dir);
    expect(await readFile(join(dir, 'marker'), 'utf8')).toBe('kept');
    expect((await stat(join(dir, 'train_spider.json'))).mtimeMs).toBe(trainMtimeMs);
    expect(await readdir(cacheDir)).toEqual([basename(dir)]);
  });

  it('gives another seed its own directory', async () => {
    const cacheDir = join(scratch, 'seeds');
    const a = await builtinDatasetDir(cacheDir);
    const b = await builtinDatasetDir(cacheDir, { seed: 11 });
    expect(b).not.toBe(a);
    expect((await readBuiltinManifest(b)).seed).toBe(11);
    expect(await readFile(join(b, 'train_spider.json'), 'utf8')).not.toBe(await readFile(join(a, 'train_spider.json'), 'utf8'));
  });

  it('survives concurrent calls from this process and two others', async () => {
    const cacheDir = join(scratch, 'race');
    const children = [startChild(cacheDir), startChild(cacheDir)];
    await Promise.all(children.map((child) => child.ready));
    for (const child of children) child.go();
    const dirs = await Promise.all([builtinDatasetDir(cacheDir), builtinDatasetDir(cacheDir), ...children.map((child) => child.result)]);
    expect(new Set(dirs).size).toBe(1);
    const [dir] = dirs;
    expect(dir).toBeDefined();
    // No temp directories are left behind, and the winner is a complete dataset.
    expect(await readdir(cacheDir)).toEqual([basename(dir ?? '')]);
    const reference = await builtinDatasetDir(join(scratch, 'reuse'));
    for (const file of ['train_spider.json', 'dev.json', 'tables.json']) {
      expect(await readFile(join(dir ?? '', file), 'utf8'), file).toBe(await readFile(join(reference, file), 'utf8'));
    }
  });

  it('rejects an invalid seed', async () => {
    await expect(builtinDatasetDir(join(scratch, 'bad'), { seed: 1.5 })).rejects.toMatchObject({ code: 'VALIDATION' });
  });

  it('reports a directory that is not a built-in dataset', async () => {
    await expect(readBuiltinManifest(scratch)).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });
});

describe("'builtin-heldout': the built-in dataset with a larger dev split", () => {
  it('has the same databases and train split, the standard dev questions as a prefix and 152 more, none a train question', async () => {
    const cache = join(scratch, 'heldout');
    const standard = await builtinDatasetDir(cache);
    const heldout = await builtinDatasetDir(cache, { extraDevPerInstance: 3 });
    expect(heldout).not.toBe(standard);
    expect(basename(heldout)).toBe(builtinCacheName(DEFAULT_BUILTIN_SEED, 3));
    const read = async (dir: string, file: string): Promise<string> => readFile(join(dir, file), 'utf8');
    expect(await read(heldout, 'train_spider.json')).toBe(await read(standard, 'train_spider.json'));
    expect(await read(heldout, 'tables.json')).toBe(await read(standard, 'tables.json'));
    for (const db of await readdir(join(standard, 'database'))) {
      expect((await readFile(join(heldout, 'database', db, `${db}.sqlite`))).equals(await readFile(join(standard, 'database', db, `${db}.sqlite`)))).toBe(true);
    }
    const dev = JSON.parse(await read(standard, 'dev.json')) as { query: string; question: string }[];
    const larger = JSON.parse(await read(heldout, 'dev.json')) as { query: string; question: string }[];
    const train = JSON.parse(await read(standard, 'train_spider.json')) as { query: string }[];
    expect(dev).toHaveLength(60);
    expect(larger).toHaveLength(212);
    expect(larger.slice(0, 60)).toEqual(dev);
    const trainQueries = new Set(train.map((q) => q.query));
    expect(larger.filter((q) => trainQueries.has(q.query))).toEqual([]);
  }, 120_000);
});
