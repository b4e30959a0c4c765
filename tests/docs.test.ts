import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { commands } from '@sqlenv/cli';

/**
 * The repository stands alone: comments and docs cite the repo's own docs/ (or a paper or URL),
 * never design notes that live outside it, and every docs/*.md page they cite exists.
 */
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function files(dir: string): string[] {
  return readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((entry) => {
    const rel = path.join(dir, entry.name);
    if (entry.name === 'node_modules' || entry.name.startsWith('.')) return [];
    if (entry.isDirectory()) return files(rel);
    return /\.(ts|mjs|md|yml|sh)$/.test(entry.name) || /^Dockerfile/.test(entry.name) ? [rel] : [];
  });
}

const sources = ['packages', 'apps', 'tests', 'bench', 'docs', 'docker'].flatMap(files).concat(['README.md', 'docker-compose.yml', 'docker-compose.cpu.yml', 'docker-compose.vllm.yml']);

describe('documentation', () => {
  it('nothing cites design notes that are not in the repository', () => {
    const offenders = sources.filter((f) => f !== path.join('tests', 'docs.test.ts')).filter((f) => /DESIGN\.md|\breference\/[a-z-]+\.md|\.\.\/shared\//.test(readFileSync(path.join(root, f), 'utf8')));
    expect(offenders).toEqual([]);
  });

  it('every docs/ page cited exists', () => {
    const cited = new Set(sources.flatMap((f) => [...readFileSync(path.join(root, f), 'utf8').matchAll(/docs\/([a-z-]+\.md)/g)].map((m) => m[1] as string)));
    expect(cited.size).toBeGreaterThan(3);
    for (const page of cited) expect(existsSync(path.join(root, 'docs', page)), page).toBe(true);
  });

  it('the README is a front door: at most ~200 lines', () => {
    const lines = readFileSync(path.join(root, 'README.md'), 'utf8').split('\n').length;
    expect(lines).toBeLessThanOrEqual(210);
  });

  it("the README's package table names files that exist", () => {
    const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
    const rows = [...readme.matchAll(/^\| `((?:packages|apps)\/[^`]+)` \|.*\|([^|]*)\|\s*$/gm)];
    const files = rows.flatMap((m) => [...(m[2] as string).matchAll(/`(src\/[^`]+)`/g)].map((f) => path.join(m[1] as string, f[1] as string)));
    expect(files.length).toBeGreaterThanOrEqual(5);
    for (const file of files) expect(existsSync(path.join(root, file)), file).toBe(true);
  });

  it("architecture.md names one existing file for each newcomer's concern", () => {
    const doc = readFileSync(path.join(root, 'docs', 'architecture.md'), 'utf8');
    const section = doc.slice(doc.indexOf('## Where each concern lives'));
    const rows = [...section.matchAll(/^\| ([^|]+?) \| `([^`]+)` \|$/gm)].map((m) => ({ concern: m[1] as string, file: m[2] as string }));
    expect(rows.length).toBeGreaterThanOrEqual(10);
    for (const { concern, file } of rows) expect(existsSync(path.join(root, file)), `${concern}: ${file}`).toBe(true);
  });

  it('every sqlenv command line the README and docs/cli.md show uses a command and flags that exist', () => {
    const shown = ['README.md', path.join('docs', 'cli.md')].flatMap((f) => {
      const text = readFileSync(path.join(root, f), 'utf8');
      const blocks = [...text.matchAll(/```(?:sh|bash)\n([\s\S]*?)```/g)].map((m) => m[1] as string);
      return blocks.flatMap((b) => b.split('\n')).flatMap((line) => [...line.matchAll(/(?:^|[\s;&|(])sqlenv ([a-z-]+)([^#]*)/g)].map((m) => ({ f, command: m[1] as string, rest: m[2] as string })));
    });
    expect(shown.length).toBeGreaterThan(15);
    for (const { f, command, rest } of shown) {
      const known = commands[command];
      expect(known, `${f}: sqlenv ${command}`).toBeDefined();
      for (const flag of rest.match(/--[a-z][a-z-]*/g) ?? []) expect(known?.usage, `${f}: sqlenv ${command} ${flag}`).toContain(flag);
    }
  });
});
