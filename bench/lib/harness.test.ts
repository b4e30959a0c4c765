import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { benchFileOf, headerSummary } from './bench-index.ts';
import { runChild } from './child-process.ts';
import { parseEngineVariants } from './engine-variants.ts';
import { closeMachineRecord, machineLine, recordMachine, type MachineRecord } from './machine-record.ts';
import { resultsDir, writeResults } from './results-writer.ts';
import { interleavedRounds, resultsByVariant, roundOrder } from './rounds.ts';
import { engineStatsOf } from './serve-model-child.ts';

describe('interleaved rounds', () => {
  it('runs every variant once per round, alternating A B A B', async () => {
    const seen: string[] = [];
    const runs = await interleavedRounds(['a', 'b'], 3, (variant, round) => {
      seen.push(`${variant}${round}`);
      return `${variant}:${round}`;
    });
    expect(seen).toEqual(['a0', 'b0', 'a1', 'b1', 'a2', 'b2']);
    expect(runs.map((r) => r.result)).toEqual(['a:0', 'b:0', 'a:1', 'b:1', 'a:2', 'b:2']);
    expect([...resultsByVariant(runs)]).toEqual([
      ['a', ['a:0', 'a:1', 'a:2']],
      ['b', ['b:0', 'b:1', 'b:2']],
    ]);
  });

  it('mirrors odd rounds when asked (A B C C B A)', () => {
    expect(roundOrder(['a', 'b', 'c'], 2, { mirrored: true }).map((s) => s.variant).join('')).toBe('abccba');
  });

  it('waits for each run before the next and reports each as it ends', async () => {
    const events: string[] = [];
    await interleavedRounds(
      [1, 2],
      1,
      async (v) => {
        events.push(`start ${v}`);
        await new Promise((resolve) => setTimeout(resolve, 5));
        events.push(`end ${v}`);
        return v;
      },
      ({ variant }) => events.push(`reported ${variant}`),
    );
    expect(events).toEqual(['start 1', 'end 1', 'reported 1', 'start 2', 'end 2', 'reported 2']);
  });

  it('refuses a round count that is not a positive integer', () => {
    expect(() => roundOrder(['a'], 0)).toThrow(/positive integer/);
    expect(() => roundOrder(['a'], 1.5)).toThrow(/positive integer/);
  });
});

describe('machine record', () => {
  it('has the fields of the one naming scheme', () => {
    const record = recordMachine(new Date('2026-01-02T03:04:05.000Z'));
    expect(Object.keys(record).sort()).toEqual(['cores', 'cpuModel', 'gitCommit', 'gitDirty', 'loadAverage1mEnd', 'loadAverage1mStart', 'memoryBytes', 'node', 'startedAt'].sort());
    expect(record.startedAt).toBe('2026-01-02T03:04:05.000Z');
    expect(record.cores).toBeGreaterThan(0);
    expect(record.memoryBytes).toBeGreaterThan(0);
    expect(record.node).toBe(process.version);
    expect(record.loadAverage1mEnd).toBeNull();
    expect(record.gitCommit === null || /^[0-9a-f]{12}$/.test(record.gitCommit)).toBe(true);
    expect(closeMachineRecord(record).loadAverage1mEnd).toEqual(expect.any(Number));
  });

  it('renders one line with the load at start and end and the commit', () => {
    const record: MachineRecord = { startedAt: '2026-01-02T03:04:05.000Z', cpuModel: 'Test CPU', cores: 2, memoryBytes: 8 * 2 ** 30, node: 'v20.0.0', loadAverage1mStart: 1.5, loadAverage1mEnd: 2.25, gitCommit: 'abcdef012345', gitDirty: true };
    expect(machineLine(record)).toBe('2026-01-02T03:04:05.000Z · Test CPU · 2 cores (1-min load average 1.5 at start, 2.25 at end) · 8 GiB · Node v20.0.0 · commit abcdef012345 + uncommitted changes');
  });
});

describe('results writer', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });
  const machine: MachineRecord = { startedAt: '2026-01-02T03:04:05.000Z', cpuModel: 'Test CPU', cores: 2, memoryBytes: 2 ** 30, node: 'v20.0.0', loadAverage1mStart: 1, loadAverage1mEnd: null, gitCommit: null, gitDirty: false };

  it('writes <name>.md (title, machine line, body) and <name>.json (name, machine, data)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'bench-harness-'));
    dirs.push(dir);
    const written = writeResults('demo-bench', machine, { title: 'Demo', body: ['| a |', '| - |', '| 1 |', '', ''], data: { rows: [{ a: 1 }] } }, join(dir, 'nested'));
    expect(written.markdownPath).toBe(join(dir, 'nested', 'demo-bench.md'));
    expect(readFileSync(written.markdownPath, 'utf8')).toBe(`# Demo\n\n${machineLine(machine)}\n\n| a |\n| - |\n| 1 |\n`);
    expect(JSON.parse(readFileSync(written.jsonPath, 'utf8'))).toEqual({ name: 'demo-bench', machine, rows: [{ a: 1 }] });
  });

  it('refuses a name that is not kebab-case', () => {
    expect(() => writeResults('../escape', machine, { title: 't', body: [], data: {} }, tmpdir())).toThrow(/kebab-case/);
  });

  it('goes to BENCH_RESULTS_DIR when set, else bench/results', () => {
    expect(resultsDir({ BENCH_RESULTS_DIR: '/some/where' })).toBe('/some/where');
    expect(resultsDir({}).endsWith(join('bench', 'results'))).toBe(true);
  });
});

describe('engine variants and the bench index', () => {
  it('names variants by what they are and refuses unknown ones', () => {
    expect(parseEngineVariants('default,static')).toEqual(['default', 'static']);
    expect(parseEngineVariants(undefined)).toContain('continuous-no-prefix-share');
    expect(() => parseEngineVariants('as-filed')).toThrow(/unknown engine variant as-filed/);
  });

  it('finds a script file and the first line of its header', () => {
    expect(benchFileOf('node --import tsx bench/rollout-llm.bench.ts')).toBe('bench/rollout-llm.bench.ts');
    expect(benchFileOf('vitest run')).toBeUndefined();
    expect(headerSummary('/**\n * First line.\n * Second.\n */\nconst x = 1;')).toBe('First line.');
  });
});

describe('child processes', () => {
  it('passes the payload to the child and returns its result line', () => {
    const dir = mkdtempSync(join(tmpdir(), 'bench-child-'));
    try {
      const harness = fileURLToPath(new URL('./child-process.ts', import.meta.url));
      const script = join(dir, 'child.ts');
      writeFileSync(
        script,
        `import { childPayload, replyToParent } from ${JSON.stringify(harness)};\n` +
          `const { x } = childPayload() as { x: number };\n` +
          `if (x < 0) process.exit(3);\n` +
          `process.stdout.write('noise before the result\\n');\n` +
          `replyToParent({ doubled: 2 * x });\n`,
      );
      expect(runChild(script, { x: 21 })).toEqual({ doubled: 42 });
      expect(() => runChild(script, { x: -1 })).toThrow(/status 3/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('serve-model metrics', () => {
  it('reads the engine counters of /metrics and nothing else', () => {
    const text = [
      '# TYPE sqlenv_model_server_engine_stat gauge',
      'sqlenv_model_server_engine_stat{stat="turns"} 33',
      'sqlenv_model_server_engine_stat{stat="meanBatchSize"} 2.78',
      'sqlenv_model_server_requests_total{route="/v1/completions",status="200"} 33',
    ].join('\n');
    expect(engineStatsOf(text)).toEqual({ turns: 33, meanBatchSize: 2.78 });
  });
});
