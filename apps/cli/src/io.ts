import type { Logger } from '@sqlenv/shared';

/** What a command may touch: output streams and a logger (stderr). Injected so tests can capture them. */
export interface CommandIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WriteStream;
  stdin: NodeJS.ReadableStream;
  logger: Logger;
  /** Environment variables (default: process.env, set by main). */
  env?: Record<string, string | undefined>;
}
