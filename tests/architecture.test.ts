import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The import graph between workspaces follows docs/architecture.md ("Packages"): apps → packages,
 * never the reverse; `shared` depends on nothing internal; the ML packages
 * (onnx-graph, model, grpo) never reach queue, server or SQL code, so they run
 * and test offline on their own.
 */
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Internal dependencies each package may import. Apps may import any package. */
const allowedPackageDeps: Record<string, readonly string[]> = {
  shared: [],
  protocol: ['shared'],
  'sql-env': ['shared', 'protocol'],
  agents: ['shared', 'protocol', 'model'],
  'onnx-graph': ['shared'],
  model: ['shared', 'onnx-graph'],
  grpo: ['shared', 'onnx-graph', 'model'],
  client: ['shared', 'protocol'],
  /** The run directory: protocol- and agents-level types only, never the queue or the trainer. */
  runs: ['shared', 'protocol', 'agents', 'model'],
  /** The vLLM-contract server over the inference engine (sqlenv serve-model). */
  'model-server': ['shared', 'protocol', 'model'],
  rollout: ['shared', 'protocol', 'sql-env', 'agents', 'client', 'model', 'grpo', 'onnx-graph', 'runs'],
};
/**
 * Apps that an app may import. apps/cli holds every argv handler and uses the env-server's server
 * library for `sqlenv serve`; the coordinator, worker and trainer mains are thin entry points over
 * the CLI's handlers. The env-server's own main reads environment variables only.
 */
const allowedAppImports: Record<string, readonly string[]> = {
  cli: ['env-server'],
  coordinator: ['cli'],
  worker: ['cli'],
  trainer: ['cli'],
  'env-server': [],
};
/**
 * Files under packages/*\/src that read process.argv: scripts `node` runs directly, not commands —
 * two child processes, whose argument is the parent's message (a model path and options, the SQL
 * limits), and the maintainer's script that regenerates cuda-kernels.json (docs/operations.md, "GPU").
 */
const scriptEntries = new Set(['packages/onnx-graph/src/runtime/placement-probe.mjs', 'packages/onnx-graph/src/kernel-coverage/extract-kernel-table.ts', 'packages/sql-env/src/sandbox/executor-child.ts']);
/** External modules the ML packages must never import. */
const forbiddenInMl = ['bullmq', 'ioredis', 'better-sqlite3', 'ws'];
const mlPackages = ['onnx-graph', 'model', 'grpo'];

interface Workspace {
  kind: 'packages' | 'apps';
  name: string;
  dir: string;
  declared: Set<string>;
}

function listWorkspaces(): Workspace[] {
  const out: Workspace[] = [];
  for (const kind of ['packages', 'apps'] as const) {
    for (const name of readdirSync(path.join(root, kind))) {
      const dir = path.join(root, kind, name);
      const manifestPath = path.join(dir, 'package.json');
      try {
        statSync(manifestPath);
      } catch {
        continue;
      }
      const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as { dependencies?: Record<string, string> };
      out.push({ kind, name, dir, declared: new Set(Object.keys(manifest.dependencies ?? {})) });
    }
  }
  return out;
}

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      if (entry.name === 'node_modules') continue;
      const full = path.join(d, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (/\.(ts|mts|js|mjs)$/.test(entry.name)) out.push(full);
    }
  };
  walk(dir);
  return out;
}

/** Module specifiers of static and dynamic imports and re-exports. */
export function importSpecifiers(source: string): string[] {
  const specs: string[] = [];
  const patterns = [/\bfrom\s+['"]([^'"]+)['"]/g, /\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)/g, /^\s*import\s+['"]([^'"]+)['"]/gm];
  for (const pattern of patterns) for (const match of source.matchAll(pattern)) if (match[1]) specs.push(match[1]);
  return specs;
}

const workspaces = listWorkspaces();
const workspaceDirs = workspaces.map((w) => ({ ...w, src: path.join(w.dir, 'src') }));

describe('architecture: the import graph between workspaces', () => {
  it('finds the workspaces docs/architecture.md names', () => {
    const names = workspaces.filter((w) => w.kind === 'packages').map((w) => w.name);
    for (const expected of ['shared', 'protocol', 'sql-env', 'agents', 'onnx-graph', 'model', 'runs', 'rollout', 'client']) expect(names).toContain(expected);
  });

  for (const ws of workspaceDirs) {
    it(`${ws.kind}/${ws.name} imports only what it may, and declares it`, () => {
      const problems: string[] = [];
      for (const file of sourceFiles(ws.dir)) {
        const rel = path.relative(root, file);
        for (const spec of importSpecifiers(readFileSync(file, 'utf8'))) {
          if (spec.startsWith('.')) {
            const target = path.resolve(path.dirname(file), spec);
            if (!target.startsWith(ws.dir + path.sep)) problems.push(`${rel}: relative import '${spec}' leaves its workspace`);
            continue;
          }
          const internal = /^@sqlenv\/([^/]+)/.exec(spec)?.[1];
          if (internal !== undefined) {
            const target = workspaces.find((w) => w.name === internal);
            if (target === undefined) {
              problems.push(`${rel}: imports unknown workspace @sqlenv/${internal}`);
              continue;
            }
            if (ws.kind === 'packages') {
              if (target.kind === 'apps') problems.push(`${rel}: a package imports the app @sqlenv/${internal}`);
              else if (!(allowedPackageDeps[ws.name] ?? []).includes(internal) && internal !== ws.name) {
                problems.push(`${rel}: packages/${ws.name} may not import @sqlenv/${internal}`);
              }
            } else if (target.kind === 'apps' && !(allowedAppImports[ws.name] ?? []).includes(internal) && internal !== ws.name) {
              problems.push(`${rel}: apps/${ws.name} may not import the app @sqlenv/${internal}`);
            }
            if (internal !== ws.name && !ws.declared.has(`@sqlenv/${internal}`)) problems.push(`${rel}: @sqlenv/${internal} is not in package.json dependencies`);
            continue;
          }
          const external = spec.startsWith('node:') ? null : spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0];
          if (external !== null && external !== undefined && mlPackages.includes(ws.name) && forbiddenInMl.includes(external)) {
            problems.push(`${rel}: ML package imports ${external}`);
          }
        }
      }
      expect(problems).toEqual([]);
    });
  }

  it('packages export libraries only: no file under packages/*/src parses argv (node:util parseArgs) or reads process.argv', () => {
    const parsing = workspaceDirs
      .filter((w) => w.kind === 'packages')
      .flatMap((w) => sourceFiles(w.src))
      .filter((f) => !/\.test\.ts$|[/\\]testing[/\\]/.test(f) && !scriptEntries.has(path.relative(root, f)))
      .filter((f) => {
        const source = readFileSync(f, 'utf8');
        return /\bprocess\.argv\b/.test(source) || (/['"]node:util['"]/.test(source) && /\bparseArgs\b/.test(source));
      });
    expect(parsing.map((f) => path.relative(root, f))).toEqual([]);
  });

  it('has no dependency cycle between workspaces', () => {
    const graph = new Map(workspaces.map((w) => [w.name, [...w.declared].filter((d) => d.startsWith('@sqlenv/')).map((d) => d.slice(8))]));
    const state = new Map<string, 'visiting' | 'done'>();
    const cycles: string[] = [];
    const visit = (node: string, trail: string[]): void => {
      if (state.get(node) === 'done') return;
      if (state.get(node) === 'visiting') {
        cycles.push([...trail, node].join(' → '));
        return;
      }
      state.set(node, 'visiting');
      for (const next of graph.get(node) ?? []) visit(next, [...trail, node]);
      state.set(node, 'done');
    };
    for (const node of graph.keys()) visit(node, []);
    expect(cycles).toEqual([]);
  });

  it('detects a forbidden import (the checker itself can fail)', () => {
    expect(importSpecifiers(`import { Queue } from 'bullmq';\nconst m = await import('@sqlenv/sql-env');\nexport * from './x.ts';`)).toEqual(['bullmq', './x.ts', '@sqlenv/sql-env']);
  });

  it('has no import cycle between files (static value imports; type-only and dynamic imports do not run at load)', () => {
    const cycles = fileImportCycles(workspaceDirs.flatMap((w) => sourceFiles(w.src).filter((f) => !/\.test\.ts$/.test(f))));
    expect(cycles).toEqual([]);
  });

  it('tests/ and bench/ import workspaces by name (`@sqlenv/x`, test helpers as `@sqlenv/x/testing`), never by a path into their sources', () => {
    const deep = ['tests', 'bench'].flatMap((d) => sourceFiles(path.join(root, d))).flatMap((f) =>
      importSpecifiers(readFileSync(f, 'utf8'))
        .filter((s) => /^(\.\.\/)+(packages|apps)\//.test(s))
        .map((s) => `${path.relative(root, f)}: ${s}`),
    );
    expect(deep).toEqual([]);
  });

  it('test helpers live in folders named testing/ (no test-fixtures, test-support or test-utils)', () => {
    const odd = workspaceDirs.flatMap((w) => sourceFiles(w.src)).map((f) => path.relative(root, f)).filter((f) => /(^|\/)(test-fixtures|test-support)\/|test-utils\.ts$/.test(f));
    expect(odd).toEqual([]);
  });

  it('every Lua script of the Redis transport lives in redis-scripts.ts', () => {
    const home = path.join('packages', 'rollout', 'src', 'transport', 'redis-scripts.ts');
    const elsewhere = workspaceDirs.flatMap((w) => sourceFiles(w.src)).filter((f) => !/\.test\.ts$/.test(f) && path.relative(root, f) !== home && /redis\.call\(/.test(readFileSync(f, 'utf8')));
    expect(elsewhere.map((f) => path.relative(root, f))).toEqual([]);
  });

  it('finds a file cycle when there is one (the checker itself can fail)', () => {
    const files = new Map([
      ['/x/a.ts', "import { b } from './b.ts';\nimport type { C } from './c.ts';"],
      ['/x/b.ts', "export { a } from './a.ts';"],
      ['/x/c.ts', "import { a } from './a.ts';"],
    ]);
    expect(fileImportCycles([...files.keys()], (f) => files.get(f) ?? '')).toEqual(['x/a.ts → x/b.ts → x/a.ts'.replace(/x\//g, path.relative(root, '/x') + '/')]);
  });
});

/** Value imports that run at module load: static `import … from`, `export … from` and bare `import '…'`, minus `import type` / `export type`. */
function loadTimeSpecifiers(source: string): string[] {
  const specs: string[] = [];
  for (const match of source.matchAll(/^\s*(import|export)\s+(type\s+)?([^'";]*?)\s*from\s+['"]([^'"]+)['"]/gm)) {
    if (match[2] === undefined && match[4] !== undefined) specs.push(match[4]);
  }
  for (const match of source.matchAll(/^\s*import\s+['"]([^'"]+)['"]/gm)) if (match[1]) specs.push(match[1]);
  return specs;
}

/** Resolve a specifier to a source file: relative paths as written, `@sqlenv/x` to that workspace's entry (`src/index.ts`). */
function resolveSource(from: string, spec: string): string | undefined {
  if (spec.startsWith('.')) return path.resolve(path.dirname(from), spec);
  const internal = /^@sqlenv\/([^/]+)$/.exec(spec)?.[1];
  if (internal === undefined) return undefined;
  const ws = workspaces.find((w) => w.name === internal);
  return ws === undefined ? undefined : path.join(ws.dir, 'src', 'index.ts');
}

/** Every cycle of the file import graph, each once, as `a → b → a` with paths from the repository root. */
function fileImportCycles(files: readonly string[], read: (file: string) => string = (f) => readFileSync(f, 'utf8')): string[] {
  const known = new Set(files);
  const edges = new Map(files.map((f) => [f, loadTimeSpecifiers(read(f)).map((s) => resolveSource(f, s)).filter((t): t is string => t !== undefined && known.has(t))]));
  const state = new Map<string, 'visiting' | 'done'>();
  const cycles: string[] = [];
  const stack: string[] = [];
  const visit = (node: string): void => {
    state.set(node, 'visiting');
    stack.push(node);
    for (const next of edges.get(node) ?? []) {
      if (state.get(next) === 'visiting') cycles.push([...stack.slice(stack.indexOf(next)), next].map((f) => path.relative(root, f)).join(' → '));
      else if (state.get(next) === undefined) visit(next);
    }
    stack.pop();
    state.set(node, 'done');
  };
  for (const file of files) if (state.get(file) === undefined) visit(file);
  return cycles;
}

/** Calls that pass every element of an array as an argument (the stack overflows past ~100,000). */
export const UNBOUNDED_SPREAD = /\bMath\.(?:min|max)\([^()]*\.\.\.|\bString\.fromC(?:harCode|odePoint)\(\s*\.\.\./;

describe('no spread of an array into Math.min/Math.max/String.fromCharCode outside tests', () => {
  it('finds none in packages/ and apps/ (use minOf/maxOf/appendAll from @sqlenv/shared)', () => {
    const found: string[] = [];
    for (const ws of workspaceDirs) {
      for (const file of sourceFiles(ws.dir)) {
        if (/\.test\.ts$|[/\\]testing[/\\]|[/\\]web[/\\].*\.js$/.test(file)) continue;
        readFileSync(file, 'utf8')
          .split('\n')
          .forEach((line, i) => {
            // Comments may name the forbidden forms (to explain them).
            if (!/^\s*(\*|\/\/|\/\*)/.test(line) && UNBOUNDED_SPREAD.test(line)) found.push(`${path.relative(root, file)}:${i + 1}: ${line.trim()}`);
          });
      }
    }
    expect(found).toEqual([]);
  });

  it('the pattern catches the forms it is meant to (it can fail)', () => {
    for (const bad of ['Math.min(...xs)', 'Math.max(0, ...Object.keys(h).map(Number))', 'String.fromCharCode(...bytes)']) expect(UNBOUNDED_SPREAD.test(bad)).toBe(true);
    for (const ok of ['Math.max(a, b)', 'maxOf(xs)', 'f(...args)']) expect(UNBOUNDED_SPREAD.test(ok)).toBe(false);
  });
});
