/** The list `npm run bench` prints: every `bench:*` script of package.json with the first line of its file's header. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';

const PackageJsonSchema = z.object({ scripts: z.record(z.string(), z.string()) });

export interface BenchEntry {
  script: string;
  file: string;
  summary: string;
}

/** The bench file a script runs (`node --import tsx bench/x.bench.ts`), or undefined. */
export function benchFileOf(command: string): string | undefined {
  return /\b(bench\/[a-z0-9-]+\.bench\.ts)\b/.exec(command)?.[1];
}

/** The first sentence-bearing line of a file's leading block comment. */
export function headerSummary(source: string): string {
  const header = /^\/\*\*([\s\S]*?)\*\//.exec(source)?.[1] ?? '';
  const first = header
    .split('\n')
    .map((line) => line.replace(/^\s*\*\s?/, '').trim())
    .find((line) => line !== '');
  return first ?? '';
}

export function benchEntries(root: string): BenchEntry[] {
  const { scripts } = PackageJsonSchema.parse(JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')));
  return Object.entries(scripts).flatMap(([script, command]) => {
    const file = script.startsWith('bench:') ? benchFileOf(command) : undefined;
    return file === undefined ? [] : [{ script, file, summary: headerSummary(readFileSync(join(root, file), 'utf8')) }];
  });
}
