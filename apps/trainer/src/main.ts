import { trainerCommand } from '@sqlenv/rollout';

/**
 * `node --import tsx apps/trainer/src/main.ts [options]`: the trainer as its own
 * process (docker-compose runs one per container). Options come from the command
 * line and environment variables; SIGTERM/SIGINT stop it gracefully.
 */
const controller = new AbortController();
for (const signal of ['SIGTERM', 'SIGINT'] as const) process.once(signal, () => controller.abort());

const code = await trainerCommand(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env, signal: controller.signal });
process.exitCode = code;
// Everything is closed by now; a stray handle (a socket in TIME_WAIT) must not keep the container alive.
setTimeout(() => process.exit(code), 2_000).unref();
