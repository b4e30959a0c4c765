import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { AppError } from './app-error.ts';
import { checkOutputNotInput, writeDirAtomic, writeDirAtomicAsync, writeFileAtomic } from './atomic-write.ts';

const scratch = mkdtempSync(join(tmpdir(), 'sqlenv-atomic-write-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function fresh(name: string): string {
  const dir = join(scratch, name);
  mkdirSync(dir);
  return dir;
}

function thrown(run: () => unknown): AppError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    return error as AppError;
  }
  throw new Error('expected an error');
}

describe('writeFileAtomic', () => {
  it('writes and replaces a file, leaving no temporary behind', () => {
    const dir = fresh('file');
    writeFileAtomic(join(dir, 'a.txt'), 'one');
    writeFileAtomic(join(dir, 'a.txt'), 'two');
    expect(readFileSync(join(dir, 'a.txt'), 'utf8')).toBe('two');
    expect(readdirSync(dir)).toEqual(['a.txt']);
  });

  it('refuses a directory at the path by name and writes no temporary', () => {
    const dir = fresh('file-is-dir');
    mkdirSync(join(dir, 'report.html'));
    expect(thrown(() => writeFileAtomic(join(dir, 'report.html'), '<html>')).message).toContain(`${join(dir, 'report.html')}: it is a directory`);
    expect(readdirSync(dir)).toEqual(['report.html']);
  });
});

describe('writeDirAtomic', () => {
  it('refuses a non-empty directory without force, before filling anything', () => {
    const parent = fresh('dir-refuse');
    const out = join(parent, 'model');
    mkdirSync(out);
    writeFileSync(join(out, 'tokenizer.json'), 'old');
    let filled = false;
    const error = thrown(() => writeDirAtomic(out, () => (filled = true), { label: '--out' }));
    expect(error.message).toBe(`--out ${out} is not empty; pass --force to replace it, or choose another directory`);
    expect(filled).toBe(false);
    expect(readdirSync(out)).toEqual(['tokenizer.json']);
  });

  it('with force replaces the whole directory (no old file survives) and cleans up', () => {
    const parent = fresh('dir-force');
    const out = join(parent, 'model');
    mkdirSync(out);
    writeFileSync(join(out, 'tokenizer.json'), 'old');
    writeDirAtomic(out, (dir) => writeFileSync(join(dir, 'config.json'), 'new'), { force: true });
    expect(readdirSync(out)).toEqual(['config.json']);
    expect(readdirSync(parent)).toEqual(['model']);
  });

  it('leaves nothing behind when fill fails, and an existing output untouched', async () => {
    const parent = fresh('dir-fail');
    const out = join(parent, 'adapter');
    expect(() => writeDirAtomic(out, (dir) => {
      writeFileSync(join(dir, 'half'), 'x');
      throw new Error('disk full');
    })).toThrow('disk full');
    expect(readdirSync(parent)).toEqual([]);
    mkdirSync(out);
    writeFileSync(join(out, 'keep'), 'x');
    await expect(writeDirAtomicAsync(out, async () => {
      throw new Error('boom');
    }, { force: true })).rejects.toThrow('boom');
    expect(readdirSync(parent)).toEqual(['adapter']);
    expect(readdirSync(out)).toEqual(['keep']);
  });
});

describe('checkOutputNotInput', () => {
  it('refuses an output equal to, inside or around an input, through symlinks too', () => {
    const parent = fresh('inputs');
    const model = join(parent, 'model');
    mkdirSync(model);
    symlinkSync(model, join(parent, 'link'));
    const check = (out: string): void => checkOutputNotInput({ label: '--out', path: out }, [{ label: '--model', path: model }]);
    expect(thrown(() => check(model)).message).toContain(`is --model ${model}`);
    expect(thrown(() => check(join(model, 'sub', 'deeper'))).message).toContain('is inside --model');
    expect(thrown(() => check(join(parent, 'link'))).message).toContain('an output never replaces an input');
    expect(thrown(() => check(parent)).message).toContain('contains --model');
    expect(() => check(join(parent, 'model-out'))).not.toThrow();
  });
});
