/**
 * The one writer of bench results: bench/results/<name>.md (title, machine line, body) and
 * <name>.json (the machine record beside the bench's own data). BENCH_RESULTS_DIR sends both
 * elsewhere (trial runs that must not replace the files the docs cite).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import { machineLine, type MachineRecord } from './machine-record.ts';
import { benchDir } from './repo-paths.ts';

const ResultsEnvSchema = z.object({ BENCH_RESULTS_DIR: z.string().min(1).optional() });

/** Where results go: BENCH_RESULTS_DIR (relative to the working directory) or bench/results. */
export function resultsDir(env: NodeJS.ProcessEnv = process.env): string {
  const dir = ResultsEnvSchema.parse(env).BENCH_RESULTS_DIR;
  return dir === undefined ? join(benchDir, 'results') : resolve(dir);
}

export interface ResultPage {
  /** The page's `#` title. */
  title: string;
  /** Markdown under the machine line. */
  body: readonly string[];
  /** The bench's figures and settings; written beside `machine` in the json. */
  data: Readonly<Record<string, unknown>> & { machine?: never };
}

export interface WrittenResults {
  markdownPath: string;
  jsonPath: string;
}

export function renderMarkdown(machine: MachineRecord, page: ResultPage): string {
  const body = page.body.join('\n').trimEnd();
  return `# ${page.title}\n\n${machineLine(machine)}\n\n${body}\n`;
}

export function renderJson(name: string, machine: MachineRecord, page: ResultPage): string {
  return `${JSON.stringify({ name, machine, ...page.data }, null, 2)}\n`;
}

/** Writes <dir>/<name>.md and <name>.json (the directory is created when missing). */
export function writeResults(name: string, machine: MachineRecord, page: ResultPage, dir: string = resultsDir()): WrittenResults {
  if (!/^[a-z0-9][a-z0-9.-]*$/.test(name)) throw new Error(`results name must be kebab-case, got ${name}`);
  mkdirSync(dir, { recursive: true });
  const markdownPath = join(dir, `${name}.md`);
  const jsonPath = join(dir, `${name}.json`);
  writeFileSync(markdownPath, renderMarkdown(machine, page));
  writeFileSync(jsonPath, renderJson(name, machine, page));
  return { markdownPath, jsonPath };
}
