import { trainerCommand } from '@sqlenv/cli';
import { withShutdownSignal } from '@sqlenv/shared';

/**
 * `node --import tsx apps/trainer/src/main.ts [options]`: the trainer as its own
 * process (docker-compose runs one per container). Options come from the command
 * line and environment variables; SIGTERM/SIGINT stop it gracefully.
 */
const code = await withShutdownSignal((signal) => trainerCommand(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env, signal }));
process.exitCode = code;
// Everything is closed by now; a stray handle (a socket in TIME_WAIT) must not keep the container alive.
setTimeout(() => process.exit(code), 2_000).unref();
