import { AppError, createRootLogger, ErrorCode, isAppError } from '@sqlenv/shared';
import { ExitCode, UsageError } from './cli-error.ts';
import type { CommandIo } from './io.ts';
import { commands, usage } from './commands.ts';
import { wantsHelp } from './flags.ts';

/**
 * Entry point of the `sqlenv` command. Returns the exit code: 0 success,
 * 1 failure (a one-line message), 2 bad arguments.
 */
export async function main(argv: string[], ioOverrides: Partial<CommandIo> = {}): Promise<number> {
  const io: CommandIo = {
    stdout: process.stdout,
    stderr: process.stderr,
    stdin: process.stdin,
    // Logs go to stderr so stdout carries only results (JSON lines, reports).
    logger: createRootLogger('sqlenv', { level: process.env['LOG_LEVEL'] ?? 'warn', fd: 2 }),
    env: process.env,
    ...ioOverrides,
  };
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    io.stdout.write(usage());
    return name === undefined ? ExitCode.USAGE : ExitCode.OK;
  }
  const command = commands[name];
  if (command === undefined) {
    io.stderr.write(`sqlenv: unknown command '${name}' (try 'sqlenv --help')\n`);
    return ExitCode.USAGE;
  }
  // Every command and sub-command answers --help with its usage, whatever else is on the line.
  if (command.ownHelp !== true && wantsHelp(rest)) {
    io.stdout.write(`sqlenv ${name}: ${command.summary}\n\nusage: ${command.usage}\n`);
    return ExitCode.OK;
  }
  try {
    return await command.run(rest, io);
  } catch (error) {
    if (error instanceof UsageError || (isAppError(error) && error.code === ErrorCode.VALIDATION)) {
      io.stderr.write(`sqlenv ${name}: ${error.message}\n`);
      return ExitCode.USAGE;
    }
    const message = isAppError(error) ? `${error.code}: ${error.message}` : error instanceof Error ? error.message : String(error);
    io.stderr.write(`sqlenv ${name}: ${message}\n`);
    if (!(error instanceof AppError) && process.env['SQLENV_DEBUG'] === '1') io.stderr.write(`${(error as Error).stack ?? ''}\n`);
    return ExitCode.FAILURE;
  }
}
