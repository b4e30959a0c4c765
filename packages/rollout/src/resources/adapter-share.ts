import { copyFileSync, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE } from '@sqlenv/model';
import { writeAdapterBlobDir } from '@sqlenv/runs';
import { AppError, ErrorCode, writeDirAtomic } from '@sqlenv/shared';

/**
 * The adapter share (`--adapter-share DIR`): a directory the trainer and the
 * inference servers both reach, holding each committed version's PEFT
 * adapter as `DIR/<run>/v<N>/`, which servers load by name (`<run>-v<N>`).
 * A version's directory is written beside its place and renamed in, before
 * the version is committed: a server never sees half an adapter, and a
 * worker never asks for one that is not there yet.
 */
export function sharedAdapterDir(share: string, runId: string, version: number): string {
  return join(share, runId, `v${version}`);
}

/** Refuse, at start, a share this process cannot create and write files in. */
export function checkAdapterShareWritable(share: string): void {
  const probe = join(share, `.write-check-${process.pid}-${randomBytes(4).toString('hex')}`);
  try {
    mkdirSync(share, { recursive: true });
    writeFileSync(probe, '');
    rmSync(probe);
  } catch (cause) {
    throw new AppError(ErrorCode.VALIDATION, `the adapter share ${share} (--adapter-share, SQLENV_ADAPTER_SHARE) is not writable: ${(cause as Error).message}`, { cause });
  }
}

/** Publish a committed version's weights blob; null (nothing written) for a blob with no adapter (statistics-only updater). */
export function publishAdapterVersion(share: string, runId: string, version: number, blob: Uint8Array): string | null {
  return writeAdapterBlobDir(sharedAdapterDir(share, runId, version), version, blob);
}

/** Publish the run's starting adapter (a PEFT directory) as version 0. */
export function publishStartAdapter(share: string, runId: string, adapterDir: string): string {
  const dir = sharedAdapterDir(share, runId, 0);
  writeDirAtomic(
    dir,
    (temp) => {
      for (const file of [ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE]) copyFileSync(join(adapterDir, file), join(temp, file));
    },
    { force: true },
  );
  return dir;
}

/** A worker's check that the version it is told to sample with was published (its share mounted here). */
export function checkAdapterPublished(share: string, runId: string, version: number): void {
  const dir = sharedAdapterDir(share, runId, version);
  if (!existsSync(join(dir, ADAPTER_CONFIG_FILE))) {
    throw new AppError(ErrorCode.NOT_FOUND, `version ${version} of run ${runId} is committed but its adapter is not in the share: ${dir}/adapter_config.json is missing (does the trainer run with the same --adapter-share?)`);
  }
}
