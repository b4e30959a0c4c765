import type { RolloutRunSpec, BatchStats } from '@sqlenv/protocol';
import { barCells, etaSeconds, formatDuration, maxOf, minOf } from '@sqlenv/shared';
import type { RunCounters } from './transport/transport.ts';

const BARS = '▁▂▃▄▅▆▇█';

/** A one-line curve: each value becomes one of eight bar heights between min and max. */
export function sparkline(values: readonly number[], min = minOf(values), max = maxOf(values)): string {
  const span = max - min;
  return values
    .map((v) => {
      const level = span <= 0 ? 0 : Math.round(((Math.min(max, Math.max(min, v)) - min) / span) * (BARS.length - 1));
      return BARS[level];
    })
    .join('');
}

/** One progress line for a TTY: bar, episodes, version, reward, speed and ETA. */
export function renderProgress(spec: RolloutRunSpec, counters: RunCounters, batches: readonly BatchStats[], elapsedS: number, columns: number): string {
  const done = counters.consumedEpisodes + counters.failedGroups * spec.group_size;
  const fraction = Math.min(1, done / spec.episodes);
  const last = batches.at(-1);
  const tail = ` ${done}/${spec.episodes} ep · v${counters.policyVersion}${last ? ` · reward ${last.reward_mean.toFixed(2)} · success ${(last.success_rate * 100).toFixed(0)}%` : ''} · ${(elapsedS > 0 ? counters.completedEpisodes / elapsedS : 0).toFixed(1)} ep/s · ETA ${formatDuration(etaSeconds(done, spec.episodes, elapsedS))}`;
  const width = Math.max(10, Math.min(40, columns - tail.length - 4));
  return `${barCells(fraction, width)}${tail}`.slice(0, Math.max(20, columns - 1));
}
