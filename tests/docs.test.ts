import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

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

const sources = ['packages', 'apps', 'tests', 'bench', 'docs', 'docker'].flatMap(files).concat(['README.md', 'docker-compose.yml', 'docker-compose.cpu.yml']);

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
});
