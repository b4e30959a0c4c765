import { isDeepStrictEqual } from 'node:util';
import type { RunInterrupted } from '@sqlenv/rollout';
import type { ClaimMode, RunCommand } from '@sqlenv/runs';
import { signalExitCode } from '@sqlenv/shared';
import { UsageError } from './cli-error.ts';
import type { CommandIo } from './io.ts';

/**
 * `--resume` and `--force` of the commands that own a run directory (learn, train): which claim
 * they make, and the options a resumed run continues with (its own, saved in command.json).
 */

/** The claim of a run directory these flags ask for. */
export function claimModeOf(flags: { resume?: boolean; force?: boolean }): ClaimMode {
  if (flags.resume === true && flags.force === true) throw new UsageError('--resume continues the run in --run-dir and --force replaces it: give one of them');
  return flags.resume === true ? 'resume' : flags.force === true ? 'force' : 'new';
}

/** Options never written to command.json (a secret has no place in a run directory). */
const NOT_SAVED = new Set(['inferenceApiKey', 'resume', 'force']);

/** The options to record in command.json. */
export function savedOptionsOf(options: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(options).filter(([key, value]) => !NOT_SAVED.has(key) && value !== undefined));
}

/**
 * A resumed run's options: the saved ones, with the given flags that only change where and how it
 * runs (`mayChange`: threads, provider, progress, servers) on top. A given flag that would change
 * what the run computes, and differs from the saved value, is refused by name.
 */
export function resumedOptions(saved: RunCommand, flags: Record<string, unknown>, given: readonly string[], mayChange: ReadonlySet<string>, flagOf: (key: string) => string): Record<string, unknown> {
  const options: Record<string, unknown> = { ...saved.options };
  const differing: string[] = [];
  for (const key of given) {
    if (key === 'runDir' || key === 'run-dir' || key === 'resume') continue;
    if (mayChange.has(key)) options[key] = flags[key];
    else if (!isDeepStrictEqual(flags[key], saved.options[key])) differing.push(`${flagOf(key)} (the run has ${JSON.stringify(saved.options[key] ?? null)})`);
  }
  if (differing.length > 0) {
    throw new UsageError(`--resume continues run ${saved.run_id} with its own settings; drop ${differing.join(', ')}`);
  }
  return options;
}

/** Say what an interrupted run kept and the command that continues it; returns the exit code (130 SIGINT, 143 SIGTERM). */
export function reportInterrupted(io: Pick<CommandIo, 'stderr'>, command: string, runDir: string, stopped: RunInterrupted): number {
  const adapters = stopped.adapters.length === 0 ? 'no adapter trained yet' : `adapters ${stopped.adapters.map((v) => `v${v}`).join(' ')}`;
  io.stderr.write(
    `sqlenv ${command}: stopped by ${stopped.reason} at policy version ${stopped.version}; kept in ${runDir}: ${adapters}, metrics.jsonl, the report (${stopped.report}), the learner's state (${stopped.checkpoint})\n` +
      `continue it with: sqlenv ${command} --run-dir ${runDir} --resume\n`,
  );
  return signalExitCode(stopped.reason);
}
