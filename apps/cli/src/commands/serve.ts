import { z } from 'zod';
import { createRootLogger } from '@sqlenv/shared';
import { resolveServeConfig, serveUntilSignal, splitList, type ServeConfig } from '@sqlenv/env-server';
import { parseFlags, wantsHelp, type FlagSpec } from '../flags.ts';
import type { CommandIo } from '../io.ts';
import { SERVE_USAGE } from './usage.ts';


const serveFlagSpecs: Record<string, FlagSpec> = {
  port: {},
  host: {},
  dataset: {},
  'cache-dir': {},
  'skip-missing-dbs': { type: 'boolean' },
  'api-key': {},
  mode: {},
  'allowed-hosts': {},
  'max-sessions': {},
  'idle-timeout-s': {},
  'no-web': { type: 'boolean' },
  'log-level': {},
  help: { type: 'boolean', short: 'h' },
};

const ServeFlags = z.object({
  port: z.string().optional(),
  host: z.string().optional(),
  dataset: z.string().optional(),
  'cache-dir': z.string().optional(),
  'skip-missing-dbs': z.boolean().optional(),
  'api-key': z.string().optional(),
  mode: z.string().optional(),
  'allowed-hosts': z.string().optional(),
  'max-sessions': z.string().optional(),
  'idle-timeout-s': z.string().optional(),
  'no-web': z.boolean().optional(),
  'log-level': z.string().optional(),
  help: z.boolean().optional(),
});

/**
 * Build the serve config: schema defaults, then environment variables, then command-line flags
 * (flags win). Throws AppError VALIDATION naming the bad value.
 */
export function parseServeConfig(argv: readonly string[], env: Record<string, string | undefined>): ServeConfig | 'help' {
  // Help before anything is parsed: `--help` next to a wrong option still prints the usage.
  if (wantsHelp(argv)) return 'help';
  const { flags } = parseFlags(argv, serveFlagSpecs, ServeFlags);
  if (flags.help === true) return 'help';
  const num = (v: string | undefined): number | undefined => (v === undefined ? undefined : Number(v));
  return resolveServeConfig(
    {
      port: num(flags.port),
      host: flags.host,
      dataset: flags.dataset,
      cacheDir: flags['cache-dir'],
      skipMissingDbs: flags['skip-missing-dbs'],
      apiKey: flags['api-key'],
      mode: flags.mode,
      allowedHosts: flags['allowed-hosts'] === undefined ? undefined : splitList(flags['allowed-hosts']),
      maxSessions: num(flags['max-sessions']),
      idleTimeoutS: num(flags['idle-timeout-s']),
      web: flags['no-web'] === true ? false : undefined,
      logLevel: flags['log-level'],
    },
    env,
  );
}

/**
 * `sqlenv serve [...]`: parse flags over env vars, serve until a signal. Returns the process exit
 * code (0 after a clean shutdown, 2 on bad options, printed with the usage).
 */
export async function serveCommand(argv: readonly string[], io: CommandIo): Promise<number> {
  let config: ServeConfig | 'help';
  try {
    config = parseServeConfig(argv, io.env ?? {});
  } catch (error) {
    io.stderr.write(`${error instanceof Error ? error.message : String(error)}\n\n${SERVE_USAGE}`);
    return 2;
  }
  if (config === 'help') {
    io.stdout.write(SERVE_USAGE);
    return 0;
  }
  const logger = io.logger ?? createRootLogger('env-server', { level: config.logLevel });
  await serveUntilSignal(config, logger);
  return 0;
}
