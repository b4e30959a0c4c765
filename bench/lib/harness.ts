/**
 * The bench harness: every bench script starts with `startBench(name)` (the machine record), runs
 * its variants with `interleavedRounds` (in child processes with `runChild` where each needs a
 * process of its own) and ends with `bench.write(page)`, the one writer of bench/results.
 */
import { closeMachineRecord, recordMachine, type MachineRecord } from './machine-record.ts';
import { writeResults, type ResultPage, type WrittenResults } from './results-writer.ts';

export interface Bench {
  readonly name: string;
  readonly machine: MachineRecord;
  /** Writes <name>.md and .json (the machine record closed with the load average now) and says where. */
  write(page: ResultPage): WrittenResults;
}

export interface BenchOptions {
  /** Where results go instead of resultsDir() (a script's own `--out` flag). */
  resultsDir?: string;
}

export function startBench(name: string, options: BenchOptions = {}): Bench {
  const machine = recordMachine();
  return {
    name,
    machine,
    write(page) {
      const written = writeResults(name, closeMachineRecord(machine), page, options.resultsDir);
      process.stderr.write(`wrote ${written.markdownPath} and ${written.jsonPath}\n`);
      return written;
    },
  };
}

export { benchDir, repoRoot, sqlenvBin } from './repo-paths.ts';
export { loadAverage1mNow, machineLine, type MachineRecord } from './machine-record.ts';
export { resultsDir, type ResultPage, type WrittenResults } from './results-writer.ts';
export { interleavedRounds, resultsByVariant, roundOrder, type RoundOptions, type RoundRun } from './rounds.ts';
export { childPayload, replyToParent, runChild, type ChildOptions } from './child-process.ts';
export { bestWallMs, median, numberArg, runSqlenv, runSqlenvAsync, stringArg } from './cli-args.ts';
export { engineStatsOf, startServeModel, type ServeModelChild } from './serve-model-child.ts';
export { benchSettings, positiveInt } from './bench-settings.ts';
