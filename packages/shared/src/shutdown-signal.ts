/**
 * Run a long-lived command with an AbortSignal that SIGTERM / SIGINT abort,
 * so workers hand back jobs, servers close sessions and training runs keep
 * their work instead of dying. The signal's name is the abort reason
 * (`signal.reason === 'SIGTERM'`). A second signal exits at once, with the
 * shell's code for it (130 for SIGINT, 143 for SIGTERM). For apps' entry
 * points (packages take a signal and never listen to the process themselves).
 */
export async function withShutdownSignal(run: (signal: AbortSignal) => Promise<number>): Promise<number> {
  const controller = new AbortController();
  const onSignal = (name: NodeJS.Signals): void => {
    if (controller.signal.aborted) process.exit(signalExitCode(name));
    controller.abort(name);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  try {
    return await run(controller.signal);
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  }
}

/** 128 + the signal's number, as a shell reports a process that a signal ended (SIGINT 130, SIGTERM 143). */
export function signalExitCode(name: string): number {
  return name === 'SIGTERM' ? 143 : name === 'SIGHUP' ? 129 : 130;
}
