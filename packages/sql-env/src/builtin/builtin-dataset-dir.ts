import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rename, rm, stat } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { z } from 'zod';
import { AppError, ErrorCode, formatZodIssues } from '@sqlenv/shared';
import {
  BUILTIN_GENERATOR_VERSION,
  BuiltinDatasetOptionsSchema,
  generateBuiltinDataset,
  type BuiltinDatasetSummary,
} from './generate-builtin-dataset.ts';

/** Written last by the generator, so its presence marks a complete dataset. */
const MANIFEST_FILE = 'builtin-manifest.json';

const BuiltinManifestSchema = z.object({
  generatorVersion: z.number().int(),
  seed: z.number().int(),
  domains: z.array(
    z.object({
      dbId: z.string(),
      title: z.string(),
      summary: z.string(),
      tables: z.array(z.object({ name: z.string(), rows: z.number().int() })),
      questions: z.object({ train: z.number().int(), dev: z.number().int() }),
    }),
  ),
});

/** The counts the generator recorded next to a built-in dataset. */
export async function readBuiltinManifest(datasetDir: string): Promise<BuiltinDatasetSummary> {
  const path = join(datasetDir, MANIFEST_FILE);
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (cause) {
    throw new AppError(ErrorCode.NOT_FOUND, `${path}: not a built-in dataset directory`, { cause });
  }
  const parsed = BuiltinManifestSchema.safeParse(JSON.parse(text));
  if (!parsed.success) throw new AppError(ErrorCode.DATASET, `${path}: ${formatZodIssues(parsed.error)}`);
  return parsed.data;
}

/** Directory name of one generator version + seed (+ extra dev draws): a change to any never reuses a stale copy. */
export function builtinCacheName(seed: number, extraDevPerInstance = 0): string {
  const extra = extraDevPerInstance > 0 ? `:extra-dev${extraDevPerInstance}` : '';
  const hash = createHash('sha256').update(`sqlenv-builtin:v${BUILTIN_GENERATOR_VERSION}:seed${seed}${extra}`).digest('hex');
  return `builtin-${hash.slice(0, 16)}`;
}

async function isComplete(dir: string): Promise<boolean> {
  return stat(join(dir, MANIFEST_FILE)).then(
    (info) => info.isFile(),
    () => false,
  );
}

async function generateInto(dir: string, seed: number, extraDevPerInstance: number): Promise<string> {
  if (await isComplete(dir)) return dir;
  await mkdir(dirname(dir), { recursive: true });
  // A private temp dir per call, renamed into place in one step: readers never
  // see a half-written dataset, and racing processes each build their own.
  const temp = await mkdtemp(`${dir}.tmp-`);
  try {
    await generateBuiltinDataset({ outDir: temp, seed, extraDevPerInstance });
    try {
      await rename(temp, dir);
    } catch (error) {
      // Another process renamed its copy first; theirs is identical.
      if (!(await isComplete(dir))) {
        throw new AppError(ErrorCode.DATASET, `cannot move the built-in dataset into ${dir}: ${(error as Error).message}`, { cause: error });
      }
    }
  } finally {
    await rm(temp, { recursive: true, force: true });
  }
  return dir;
}

/** Generations in flight in this process, so concurrent callers share one. */
const inFlight = new Map<string, Promise<string>>();

/**
 * The built-in dataset's directory under `cacheDir`, generating it the first
 * time (`<cacheDir>/builtin-<hash of generator version and seed>`). Safe to
 * call concurrently from several processes.
 */
export async function builtinDatasetDir(cacheDir: string, options: { seed?: number; extraDevPerInstance?: number } = {}): Promise<string> {
  const parsed = BuiltinDatasetOptionsSchema.pick({ seed: true, extraDevPerInstance: true }).safeParse(options);
  if (!parsed.success) throw new AppError(ErrorCode.VALIDATION, `invalid built-in dataset options: ${formatZodIssues(parsed.error)}`);
  const { seed, extraDevPerInstance } = parsed.data;
  const dir = join(resolve(cacheDir), builtinCacheName(seed, extraDevPerInstance));
  let pending = inFlight.get(dir);
  if (pending === undefined) {
    pending = generateInto(dir, seed, extraDevPerInstance).finally(() => inFlight.delete(dir));
    inFlight.set(dir, pending);
  }
  return pending;
}
