/**
 * Run a long-lived command with an AbortSignal that SIGTERM / SIGINT abort,
 * so workers hand back jobs and servers close sessions instead of dying.
 * A second signal exits at once. For apps' entry points (packages take a
 * signal and never listen to the process themselves).
 */
export async function withShutdownSignal(run: (signal: AbortSignal) => Promise<number>): Promise<number> {
  const controller = new AbortController();
  const onSignal = (): void => {
    if (controller.signal.aborted) process.exit(130);
    controller.abort();
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
