/**
 * Progress of a command's phases on stderr, one piece for every command: a bar redrawn in place on a
 * terminal, or one line per tenth of the phase in a log or a pipe, each with elapsed time and ETA.
 */

/** bar: redrawn in place; lines: a line per tenth and the last; off: nothing. */
export type ProgressMode = 'bar' | 'lines' | 'off';

/** 'auto' is a bar on a terminal and nothing elsewhere (stdout may be a --json pipe; stderr stays quiet). */
export function progressMode(requested: ProgressMode | 'auto', stream: { isTTY?: boolean }): ProgressMode {
  return requested !== 'auto' ? requested : stream.isTTY === true ? 'bar' : 'off';
}

/** "1m05s" / "42s" / "--" for an unknown duration. */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return '--';
  const whole = Math.round(seconds);
  return whole >= 60 ? `${Math.floor(whole / 60)}m${String(whole % 60).padStart(2, '0')}s` : `${whole}s`;
}

/** The time left at the rate so far: elapsed × (total − done) ÷ done; unknown before the first unit. */
export function etaSeconds(done: number, total: number, elapsedS: number): number {
  return done <= 0 ? Number.NaN : (elapsedS * Math.max(0, total - done)) / done;
}

/** "[████░░░░]": `fraction` of `width` cells filled. */
export function barCells(fraction: number, width: number): string {
  const filled = Math.round(Math.min(1, Math.max(0, fraction)) * width);
  return `[${'█'.repeat(filled)}${'░'.repeat(width - filled)}]`;
}

/** One progress line: label, bar, done/total (+ extra), elapsed and ETA, within `columns`. */
export function progressLine(label: string, done: number, total: number, elapsedS: number, columns: number, extra = ''): string {
  const tail = ` ${done}/${total}${extra} · ${formatDuration(elapsedS)} · ETA ${formatDuration(etaSeconds(done, total, elapsedS))}`;
  const width = Math.max(10, Math.min(30, columns - label.length - tail.length - 4));
  return `${label} ${barCells(total > 0 ? done / total : 1, width)}${tail}`.slice(0, Math.max(20, columns - 1));
}

/** Redraws of a bar at most this often (a redraw per episode would dominate fast phases). */
const MIN_REDRAW_MS = 50;

/** One phase's progress in a ProgressMode. */
export class PhaseProgress {
  readonly #label: string;
  readonly #stream: NodeJS.WritableStream;
  readonly #mode: ProgressMode;
  readonly #columns: number;
  readonly #startMs = performance.now();
  #lastDrawMs = Number.NEGATIVE_INFINITY;
  #lastTenth = -1;
  #latest: string | undefined;

  constructor(label: string, stream: NodeJS.WritableStream, mode: ProgressMode, columns = 100) {
    this.#label = label;
    this.#stream = stream;
    this.#mode = mode;
    this.#columns = columns;
  }

  /** Seconds since the phase started. */
  get elapsedS(): number {
    return (performance.now() - this.#startMs) / 1000;
  }

  /** The standard line for `done` of `total`. */
  update(done: number, total: number, extra = ''): void {
    if (this.#mode === 'off') return;
    this.draw(progressLine(this.#label, done, total, this.elapsedS, this.#columns, extra), done, total);
  }

  /** A line of the caller's own: redrawn (bar, throttled until the end) or printed at a new tenth short of the end (lines). */
  draw(line: string, done: number, total: number): void {
    if (this.#mode === 'off') return;
    this.#latest = line;
    if (this.#mode === 'bar') {
      const now = performance.now();
      if (done < total && now - this.#lastDrawMs < MIN_REDRAW_MS) return;
      this.#lastDrawMs = now;
      this.#stream.write(`\r${line}`);
      return;
    }
    const tenth = total <= 0 ? 10 : Math.floor((10 * done) / total);
    if (tenth >= 10 || tenth <= this.#lastTenth) return;
    this.#lastTenth = tenth;
    this.#stream.write(`${line}\n`);
  }

  /** Ends the phase with `line` (default: the latest line drawn or asked for), on a line of its own. */
  finish(line = this.#latest): void {
    if (this.#mode === 'off' || line === undefined) return;
    this.#stream.write(this.#mode === 'bar' ? `\r${line}\n` : `${line}\n`);
  }
}
