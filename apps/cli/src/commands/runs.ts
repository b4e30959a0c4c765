import { z } from 'zod';
import { parseRunId } from '@sqlenv/protocol';
import { AppError, ErrorCode, maxOf } from '@sqlenv/shared';
import { BullmqTransportConfigSchema, RunAdmin, type RunDetails, type RunListing } from '@sqlenv/rollout';
import { printUsage, parseFlags, wantsHelp, type FlagSpec } from '../flags.ts';
import { reportCommandError, type CommandIo } from '../io.ts';
import { booleanText } from '../flags.ts';
import { runsUsage } from './usage.ts';

const runsOptionSpecs: Record<string, FlagSpec> = {
  redis: { key: 'redisUrl', env: 'REDIS_URL' },
  'key-base': { key: 'keyBase', env: 'SQLENV_KEY_BASE' },
  'spill-dir': { key: 'spillDir', env: 'SQLENV_SPILL_DIR' },
  json: { key: 'json', type: 'boolean' },
  force: { key: 'force', type: 'boolean' },
  version: { key: 'version' },
};

const RunsOptionsSchema = z.object({
  redisUrl: BullmqTransportConfigSchema.shape.redisUrl,
  keyBase: BullmqTransportConfigSchema.shape.keyBase,
  spillDir: z.string().optional(),
  json: booleanText.default(false),
  force: booleanText.default(false),
  version: z.coerce.number().int().nonnegative().optional(),
});

/**
 * `sqlenv runs`: the runs in Redis, as an operator manages them.
 * - `list`: every run (active, done, expiring), one line each (`--json`: one JSON array).
 * - `show RUN`: spec, counters, keys and memory, retained weights and checkpoints.
 * - `delete RUN [--force]`: every key of the run (and its spilled blobs); an active run needs --force.
 * - `checkpoint RUN NAME [--version V]`: pin committed weights so retention never deletes them.
 */
export async function runsCommand(argv: readonly string[], io: CommandIo): Promise<number> {
  if (wantsHelp(argv)) return printUsage(io, runsUsage);
  const [action, ...rest] = argv;
  let admin: RunAdmin | undefined;
  try {
    const { positionals, flags } = splitArguments(rest);
    const options = parseFlags(flags, runsOptionSpecs, RunsOptionsSchema, { env: io.env ?? {} }).flags;
    admin = new RunAdmin({ redisUrl: options.redisUrl, keyBase: options.keyBase, ...(options.spillDir === undefined ? {} : { spillDir: options.spillDir }) });
    const out = (value: unknown, text: string): void => void io.stdout.write(options.json ? `${JSON.stringify(value)}\n` : text);
    // A run id is a name, never a pattern: 'myrun*' is refused here, before Redis is asked anything.
    const runId = positionals[0] === undefined ? undefined : parseRunId(positionals[0], `runs ${action ?? ''}`);
    switch (action) {
      case 'list': {
        const runs = await admin.list();
        out(runs, formatList(runs));
        return 0;
      }
      case 'show': {
        if (runId === undefined) throw usageError('show needs a run id');
        const details = await admin.show(runId);
        out(details, formatDetails(details));
        return 0;
      }
      case 'delete': {
        if (runId === undefined) throw usageError('delete needs a run id');
        const deleted = await admin.delete(runId, { force: options.force });
        out({ run_id: runId, deleted_keys: deleted }, `deleted run ${runId} (${deleted} keys)\n`);
        return 0;
      }
      case 'checkpoint': {
        const name = positionals[1];
        if (runId === undefined || name === undefined) throw usageError('checkpoint needs a run id and a name');
        const pinned = await admin.checkpoint(runId, name, options.version);
        out(pinned, `run ${runId}: version ${pinned.version} pinned as '${name}' (${pinned.key})\n`);
        return 0;
      }
      default:
        throw usageError(`unknown action '${action ?? ''}' (expected list, show, delete or checkpoint)`);
    }
  } catch (error) {
    return reportCommandError(io, 'runs', error);
  } finally {
    await admin?.close();
  }
}

function usageError(message: string): AppError {
  return new AppError(ErrorCode.VALIDATION, `${message}; usage: ${runsUsage}`);
}

/** Run ids and names apart from `--option value` pairs and `--flag`s. */
function splitArguments(args: readonly string[]): { positionals: string[]; flags: string[] } {
  const positionals: string[] = [];
  const flags: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (!arg.startsWith('--')) positionals.push(arg);
    else if (arg.includes('=') || runsOptionSpecs[arg.slice(2)]?.type === 'boolean') flags.push(arg);
    else flags.push(arg, ...(args[i + 1] === undefined ? [] : [args[++i] as string]));
  }
  return { positionals, flags };
}

function formatList(runs: readonly RunListing[]): string {
  if (runs.length === 0) return 'no runs\n';
  const rows = runs.map((r) => [r.run_id, r.state, `v${r.policy_version}`, r.episodes === null ? '-' : `${r.episodes} episodes`, r.expires_in_s === null ? '' : `expires in ${r.expires_in_s} s`, r.registered_at]);
  const widths = rows[0]?.map((_, c) => maxOf(rows.map((row) => (row[c] ?? '').length), 0)) ?? [];
  return `${rows.map((row) => row.map((cell, c) => cell.padEnd(widths[c] ?? 0)).join('  ').trimEnd()).join('\n')}\n`;
}

function formatDetails(d: RunDetails): string {
  const lines = [
    `run ${d.run_id} (${d.state}, version ${d.policy_version}${d.expires_in_s === null ? '' : `, expires in ${d.expires_in_s} s`})`,
    `  spec         ${d.spec.policy} on ${d.spec.dataset}, ${d.spec.episodes} episodes, groups of ${d.spec.group_size}, ${d.spec.groups_per_batch} per batch, max staleness ${d.spec.max_staleness}`,
    `  progress     ${d.state_fields['trained_groups'] ?? 0} groups trained, ${d.state_fields['dropped_groups'] ?? 0} dropped, ${d.scored_pending} scored waiting, ${d.state_fields['duplicate_trajectories'] ?? 0} duplicates`,
    `  redis        ${d.keys} keys, ${(d.memory_bytes / 1024).toFixed(1)} KiB, ${d.trash_pending} trajectories waiting for deletion`,
    `  weights      ${d.weights.map((w) => `v${w.version}`).join(' ') || 'none'}`,
    `  checkpoints  ${Object.entries(d.checkpoints).map(([n, k]) => `${n}=${k}`).join(' ') || 'none'}`,
  ];
  return `${lines.join('\n')}\n`;
}
