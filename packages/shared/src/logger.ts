import { pino, type Logger, type LoggerOptions } from 'pino';

export type { Logger } from 'pino';

/** A logger that writes nothing: the default for packages that were given none. */
export const silentLogger: Logger = pino({ level: 'silent' });

/**
 * The root logger of an app (packages never create one; they take an optional
 * logger and default to `silentLogger`). JSON lines on stdout, or on the given
 * file descriptor (CLI commands that print results on stdout log to stderr: fd 2).
 */
export function createRootLogger(name: string, options: { level?: string; fd?: number } = {}): Logger {
  const loggerOptions: LoggerOptions = { name, level: options.level ?? 'info', base: { app: name } };
  return pino(loggerOptions, pino.destination({ fd: options.fd ?? 1, sync: false }));
}
