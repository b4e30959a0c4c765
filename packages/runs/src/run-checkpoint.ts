import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { AppError, ErrorCode, formatZodIssues, writeDirAtomic } from '@sqlenv/shared';
import { readJsonFile } from './json-file.ts';
import { RUN_CHECKPOINT_DIR } from './run-files.ts';

const RESUME_FILE = 'resume.json';
const PART_SUFFIX = '.part';

/**
 * `checkpoint/resume.json`: where an interrupted GRPO phase stopped, so `--resume` continues it.
 * The adapter of `version` is in adapters/v<version>/ (none at version 0: the phase's starting
 * adapter); the learner's other state (AdamW's moments) is in checkpoint/<name>.part files.
 */
export const ResumePointSchema = z.strictObject({
  schema_version: z.literal(1),
  run_id: z.string(),
  /** The last committed version. */
  version: z.number().int().nonnegative(),
  /** Episodes of the run's groups resolved (trained, dropped or failed) by then: the resumed phase plays the rest. */
  episodes_done: z.number().int().nonnegative(),
  /** What stopped it (SIGINT, SIGTERM). */
  reason: z.string(),
  created_at: z.string(),
});
export type ResumePoint = z.infer<typeof ResumePointSchema>;

export interface SavedResumePoint {
  point: ResumePoint;
  /** The learner's parts by name (empty for a statistics-only run). */
  parts: Record<string, Buffer>;
}

/** Write checkpoint/ whole (built beside it, renamed into place): a second signal never leaves half of one. */
export function writeResumePoint(runDir: string, point: Omit<ResumePoint, 'schema_version' | 'created_at'>, parts: Readonly<Record<string, Uint8Array>>): string {
  const record = ResumePointSchema.parse({ schema_version: 1, ...point, created_at: new Date().toISOString() });
  const dir = join(runDir, RUN_CHECKPOINT_DIR);
  writeDirAtomic(
    dir,
    (temp) => {
      for (const [name, bytes] of Object.entries(parts)) {
        if (!/^[A-Za-z0-9_-]+$/.test(name)) throw new AppError(ErrorCode.INTERNAL, `a learner part named ${name} cannot be a file name`);
        writeFileSync(join(temp, `${name}${PART_SUFFIX}`), bytes);
      }
      writeFileSync(join(temp, RESUME_FILE), `${JSON.stringify(record, null, 2)}\n`);
    },
    { force: true },
  );
  return dir;
}

/** The run directory's resume point, or undefined when it has none; throws VALIDATION on a damaged one. */
export function readResumePoint(runDir: string): SavedResumePoint | undefined {
  const dir = join(runDir, RUN_CHECKPOINT_DIR);
  const point = readJsonFile(join(dir, RESUME_FILE), ResumePointSchema, formatZodIssues);
  if (point === undefined) return undefined;
  const parts = Object.fromEntries(
    readdirSync(dir)
      .filter((f) => f.endsWith(PART_SUFFIX))
      .map((f) => [f.slice(0, -PART_SUFFIX.length), readFileSync(join(dir, f))]),
  );
  return { point, parts };
}
