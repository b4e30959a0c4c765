import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { AppError, ErrorCode } from '@sqlenv/shared';
import { readRunMetrics, RUN_METRICS_FILE, writeRunReport, EVALS_DIR, readSavedEvals } from '@sqlenv/runs';
import { printUsage, wantsHelp } from '../flags.ts';
import { reportCommandError, type CommandIo } from '../io.ts';
import { reportUsage } from './usage.ts';

/** `sqlenv report RUN_DIR`: rebuild RUN_DIR/report.html from metrics.jsonl and evals/; prints its path. */
export function reportCommand(argv: readonly string[], io: CommandIo): Promise<number> {
  if (wantsHelp(argv)) return Promise.resolve(printUsage(io, reportUsage));
  try {
    if (argv.length !== 1 || argv[0] === undefined || argv[0].startsWith('-')) throw new AppError(ErrorCode.VALIDATION, `usage: ${reportUsage}`);
    const runDir = argv[0];
    if (!existsSync(join(runDir, RUN_METRICS_FILE)) && !existsSync(join(runDir, EVALS_DIR))) {
      throw new AppError(ErrorCode.NOT_FOUND, `${runDir} is not a run directory (no ${RUN_METRICS_FILE}, no ${EVALS_DIR}/)`);
    }
    const path = writeRunReport(runDir);
    io.stdout.write(`${path} (${readRunMetrics(runDir).length} versions, ${readSavedEvals(runDir).length} evaluations)\n`);
    return Promise.resolve(0);
  } catch (error) {
    return Promise.resolve(reportCommandError(io, 'report', error));
  }
}
