import { z } from 'zod';
import { checkDataset, generateBuiltinDataset, type DatasetCheckReport } from '@sqlenv/sql-env';
import { parseFlags } from '../flags.ts';
import { UsageError } from '../cli-error.ts';
import type { CommandIo } from '../io.ts';

const builtinFlags = z.object({
  out: z.string().min(1),
  seed: z.coerce.number().int().min(0).optional(),
  'extra-train-per-instance': z.coerce.number().int().min(0).optional(),
  'extra-train-only': z.boolean().default(false),
  'extra-dev-per-instance': z.coerce.number().int().min(0).optional(),
  'fresh-values': z.boolean().default(false),
});

/**
 * `sqlenv datasets check <dir>`: validate a Spider-layout directory and report what is wrong.
 * `sqlenv datasets builtin --out DIR`: write the built-in dataset there (optionally with extra
 * training draws of its templates, with extra held-out draws of dev's templates for a larger dev split,
 * or with synthetic names and places, `--fresh-values`, for training data that cannot be memorised).
 */
export async function datasetsCommand(argv: string[], io: CommandIo): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === 'builtin') {
    const { flags } = parseFlags(
      rest,
      { out: { type: 'string' }, seed: { type: 'string' }, 'extra-train-per-instance': { type: 'string' }, 'extra-train-only': { type: 'boolean' }, 'extra-dev-per-instance': { type: 'string' }, 'fresh-values': { type: 'boolean' } },
      builtinFlags,
      { command: 'datasets builtin' },
    );
    const summary = await generateBuiltinDataset({
      outDir: flags.out,
      ...(flags.seed === undefined ? {} : { seed: flags.seed }),
      ...(flags['extra-train-per-instance'] === undefined ? {} : { extraTrainPerInstance: flags['extra-train-per-instance'] }),
      extraTrainOnly: flags['extra-train-only'],
      ...(flags['extra-dev-per-instance'] === undefined ? {} : { extraDevPerInstance: flags['extra-dev-per-instance'] }),
      freshValues: flags['fresh-values'],
    });
    const train = summary.domains.reduce((n, d) => n + d.questions.train, 0);
    const dev = summary.domains.reduce((n, d) => n + d.questions.dev, 0);
    io.stdout.write(`wrote the built-in dataset (seed ${summary.seed}${summary.freshValues === true ? ', fresh values' : ''}) to ${flags.out}: ${train} train and ${dev} dev questions in ${summary.domains.length} databases\n`);
    return 0;
  }
  if (sub !== 'check') throw new UsageError(`expected 'check' or 'builtin', got '${sub ?? ''}'`);
  const { flags, positionals } = parseFlags(rest, { json: { type: 'boolean' } }, z.object({ json: z.boolean().default(false) }), { command: 'datasets check', positionals: 1 });
  const dir = positionals[0];
  if (dir === undefined) throw new UsageError('datasets check: missing <dir>');
  const report = await checkDataset(dir);
  if (flags.json) {
    io.stdout.write(`${JSON.stringify(report)}\n`);
  } else {
    io.stdout.write(renderCheck(report));
  }
  return report.ok ? 0 : 1;
}

function renderCheck(report: DatasetCheckReport): string {
  const errors = report.problems.filter((p) => p.severity === 'error');
  const warnings = report.problems.filter((p) => p.severity === 'warning');
  const lines = [
    `${report.ok ? 'OK' : 'PROBLEMS'}: ${report.dir}`,
    `  databases ${report.databases}, questions ${report.questions}, playable ${report.playable}, splits ${report.splits.join(', ') || '(none)'}`,
    `  ${errors.length} error(s), ${warnings.length} warning(s)`,
  ];
  const show = (label: string, list: typeof report.problems): void => {
    for (const p of list.slice(0, 50)) {
      const where = [p.file, p.db_id, p.question_id].filter((x) => x !== undefined).join(' ');
      lines.push(`  ${label} [${p.kind}] ${where ? `${where}: ` : ''}${p.message}`);
    }
    if (list.length > 50) lines.push(`  ... and ${list.length - 50} more ${label}s`);
  };
  show('error', errors);
  show('warning', warnings);
  return `${lines.join('\n')}\n`;
}
