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

/** Markdown files under a directory (recursive), repository-relative. */
function markdownUnder(dir: string): string[] {
  return files(dir).filter((f) => f.endsWith('.md'));
}

const journal = path.join('docs', 'journal') + path.sep;
const isHistory = (f: string): boolean => f.startsWith(journal) || f === 'CHANGELOG.md';

/** The pages that describe the repository as it is: README.md, docs/ (not its journal), and every README under packages/, apps/ and models/. */
const referencePages = ['README.md', ...markdownUnder('docs').filter((f) => !isHistory(f)), ...['packages', 'apps', 'models'].flatMap(markdownUnder).filter((f) => path.basename(f) === 'README.md')];

/** Phrases that narrate how a figure or a change came about; history belongs in docs/journal/ or CHANGELOG.md. */
const NARRATION = /\b(?:as\s+filed|this\s+round|previous\s+round|yesterday|earlier\s+session)\b/i;

function lineCount(text: string): number {
  return text.endsWith('\n') ? text.split('\n').length - 1 : text.split('\n').length;
}

/** `a/*.md`-style patterns: every segment may hold `*` (any characters but `/`); `**` is any number of segments. */
function globMatches(pattern: string): string[] {
  const walk = (dir: string, segments: string[]): string[] => {
    const [head, ...rest] = segments;
    if (head === undefined) return [dir];
    if (head === '**') return [...walk(dir, rest), ...readdirSync(path.join(root, dir), { withFileTypes: true }).filter((e) => e.isDirectory()).flatMap((e) => walk(path.join(dir, e.name), segments))];
    if (!head.includes('*')) return existsSync(path.join(root, dir, head)) ? walk(path.join(dir, head), rest) : [];
    const re = new RegExp(`^${head.split('*').map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('[^/]*')}$`);
    return readdirSync(path.join(root, dir)).filter((name) => re.test(name)).flatMap((name) => walk(path.join(dir, name), rest));
  };
  return walk('.', pattern.split('/'));
}

/** `apps/{worker,trainer}/src/main.ts` names each alternative: every one must exist. */
function expandBraces(pattern: string): string[] {
  const m = /\{([^{}]*)\}/.exec(pattern);
  if (!m) return [pattern];
  return (m[1] as string).split(',').flatMap((alt) => expandBraces(pattern.slice(0, m.index) + alt + pattern.slice(m.index + m[0].length)));
}

const SOURCE_ROOT = '(?:packages|apps|tests|bench|scripts|docker|models)/';

/** Source paths a page names: inline code relative to the repository root, links relative to the page; fenced blocks are examples, not references. */
function namedPaths(file: string): { named: string; resolved: string }[] {
  const text = readFileSync(path.join(root, file), 'utf8').replace(/```[\s\S]*?```/g, '');
  const clean = (p: string): string => p.replace(/#.*$/, '').replace(/:\d+(?:-\d+)?$/, '').replace(/\/$/, '');
  const coded = [...text.matchAll(new RegExp(`\`(${SOURCE_ROOT}[^\`\\s]*)\``, 'g'))].map((m) => ({ named: m[1] as string, resolved: clean(m[1] as string) }));
  const linked = [...text.matchAll(new RegExp(`\\]\\(((?:\\.\\./)*${SOURCE_ROOT}[^)\\s]*)\\)`, 'g'))].map((m) => ({ named: m[1] as string, resolved: path.relative(root, path.resolve(root, path.dirname(file), clean(m[1] as string))) }));
  return [...coded, ...linked];
}

describe('documentation is a reference', () => {
  it('no narration of rounds of work outside docs/journal/ and CHANGELOG.md, in docs, READMEs and source comments', () => {
    const checked = ['packages', 'apps', 'tests', 'bench', 'docs', 'docker', 'models', 'scripts']
      .filter((d) => existsSync(path.join(root, d)))
      .flatMap(files)
      .concat(['README.md'])
      .filter((f) => !isHistory(f) && !f.startsWith(path.join('bench', 'results') + path.sep) && f !== path.join('tests', 'docs.test.ts'));
    expect(checked.length).toBeGreaterThan(100);
    const offenders = checked.filter((f) => NARRATION.test(readFileSync(path.join(root, f), 'utf8')));
    expect(offenders).toEqual([]);
  });

  it('the narration check recognises the phrases it is for', () => {
    for (const phrase of ['the engine As Filed', 'measured this\nround', 'The previous round', 'run yesterday', 'an earlier session']) expect(NARRATION.test(phrase), phrase).toBe(true);
    expect(NARRATION.test('the `as-filed` bench engine, the previous rounding')).toBe(false);
  });

  it('docs/inference.md is at most 300 lines', () => {
    expect(lineCount(readFileSync(path.join(root, 'docs', 'inference.md'), 'utf8'))).toBeLessThanOrEqual(300);
  });

  it('every line of docs/measured.md is at most 400 characters', () => {
    const long = readFileSync(path.join(root, 'docs', 'measured.md'), 'utf8').split('\n').map((line, i) => ({ line: i + 1, chars: [...line].length })).filter((l) => l.chars > 400);
    expect(long).toEqual([]);
  });

  it('every source path the reference pages name exists', () => {
    const named = referencePages.flatMap((f) => namedPaths(f).map((p) => ({ ...p, f })));
    expect(named.length).toBeGreaterThan(50);
    const missing = named.filter(({ resolved }) => expandBraces(resolved).some((p) => (p.includes('*') ? globMatches(p).length === 0 : !existsSync(path.join(root, p)))));
    expect(missing.map(({ f, named: n }) => `${f}: ${n}`)).toEqual([]);
  });

  it('the path check reads inline code, relative links, line suffixes and explicit globs', () => {
    expect(globMatches('packages/*/README.md').length).toBeGreaterThan(5);
    expect(globMatches('bench/**/no-such-file-*.md')).toEqual([]);
    expect(expandBraces('apps/{worker,trainer}/src/main.ts')).toEqual(['apps/worker/src/main.ts', 'apps/trainer/src/main.ts']);
    expect(namedPaths('README.md').some((p) => p.resolved === path.join('models', 'README.md'))).toBe(true);
  });
});
