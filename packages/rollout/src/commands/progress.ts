import type { RolloutRunSpec } from '@sqlenv/protocol';
import type { BatchStats } from '../batch-stats.ts';
import type { RunCounters } from '../transport/transport.ts';

const BARS = '▁▂▃▄▅▆▇█';

/** A one-line curve: each value becomes one of eight bar heights between min and max. */
export function sparkline(values: readonly number[], min = Math.min(...values), max = Math.max(...values)): string {
  const span = max - min;
  return values
    .map((v) => {
      const level = span <= 0 ? 0 : Math.round(((Math.min(max, Math.max(min, v)) - min) / span) * (BARS.length - 1));
      return BARS[level];
    })
    .join('');
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

function bar(fraction: number, width: number): string {
  const filled = Math.round(Math.min(1, Math.max(0, fraction)) * width);
  return `[${'█'.repeat(filled)}${'░'.repeat(width - filled)}]`;
}

/** One progress line for a TTY: label, bar, done/total, elapsed and ETA (plus an optional tail). */
export function progressBar(label: string, done: number, total: number, elapsedS: number, columns: number, extra = ''): string {
  const tail = ` ${done}/${total}${extra} · ${formatDuration(elapsedS)} · ETA ${formatDuration(etaSeconds(done, total, elapsedS))}`;
  const width = Math.max(10, Math.min(30, columns - label.length - tail.length - 4));
  return `${label} ${bar(total > 0 ? done / total : 1, width)}${tail}`.slice(0, Math.max(20, columns - 1));
}

/** One progress line for a TTY: bar, episodes, version, reward, speed and ETA. */
export function renderProgress(spec: RolloutRunSpec, counters: RunCounters, batches: readonly BatchStats[], elapsedS: number, columns: number): string {
  const done = counters.consumedEpisodes + counters.failedGroups * spec.group_size;
  const fraction = Math.min(1, done / spec.episodes);
  const last = batches.at(-1);
  const tail = ` ${done}/${spec.episodes} ep · v${counters.policyVersion}${last ? ` · reward ${last.reward_mean.toFixed(2)} · success ${(last.success_rate * 100).toFixed(0)}%` : ''} · ${(elapsedS > 0 ? counters.completedEpisodes / elapsedS : 0).toFixed(1)} ep/s · ETA ${formatDuration(etaSeconds(done, spec.episodes, elapsedS))}`;
  const width = Math.max(10, Math.min(40, columns - tail.length - 4));
  return `${bar(fraction, width)}${tail}`.slice(0, Math.max(20, columns - 1));
}
