/**
 * A one-line progress bar on a terminal (stderr), silent elsewhere, so that
 * stdout stays clean for `--json` output and pipes.
 */
export class ProgressBar {
  readonly #stream: NodeJS.WriteStream;
  readonly #label: string;
  readonly #enabled: boolean;
  readonly #startMs = Date.now();
  #lastDrawMs = 0;

  constructor(label: string, stream: NodeJS.WriteStream = process.stderr, enabled = stream.isTTY === true) {
    this.#label = label;
    this.#stream = stream;
    this.#enabled = enabled;
  }

  update(done: number, total: number, suffix = ''): void {
    if (!this.#enabled) return;
    const now = Date.now();
    // Redraw at most ~20 times a second; a redraw per episode would dominate fast runs.
    if (done < total && now - this.#lastDrawMs < 50) return;
    this.#lastDrawMs = now;
    const width = 30;
    const fraction = total === 0 ? 1 : done / total;
    const filled = Math.round(fraction * width);
    const elapsedS = (now - this.#startMs) / 1000;
    const rate = elapsedS > 0 ? done / elapsedS : 0;
    const bar = `${'█'.repeat(filled)}${'░'.repeat(width - filled)}`;
    this.#stream.write(`\r${this.#label} ${bar} ${done}/${total} ${rate.toFixed(1)}/s ${suffix}`.padEnd(100).slice(0, 120));
  }

  finish(): void {
    if (this.#enabled) this.#stream.write('\n');
  }
}
