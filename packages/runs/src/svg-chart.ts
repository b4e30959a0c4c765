/**
 * Line charts as inline SVG markup, written by hand so the run report is one file with no script,
 * no font and no chart library. Every text that reaches the markup goes through escapeHtml.
 */
import { appendAll, maxOf, minOf } from '@sqlenv/shared';

/** Text safe inside HTML/SVG elements and double- or single-quoted attributes. */
export function escapeHtml(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;').replaceAll("'", '&#39;');
}

export interface ChartPoint {
  x: number;
  /** Null: no value at this x (the curve breaks). */
  y: number | null;
}

export interface ChartSeries {
  /** Machine name (data-series attribute). */
  name: string;
  /** Legend text. */
  label: string;
  color: string;
  points: readonly ChartPoint[];
}

/** A single marked point (a held-out evaluation at the version it was taken). */
export interface ChartMarker {
  x: number;
  y: number;
  label: string;
  color: string;
}

export interface LineChartOptions {
  /** data-chart attribute. */
  id: string;
  title: string;
  xLabel: string;
  yLabel: string;
  series: readonly ChartSeries[];
  markers?: readonly ChartMarker[];
  /** Fixed bounds (rates: 0 and 1); otherwise from the data. */
  yMin?: number;
  yMax?: number;
  widthPx?: number;
  heightPx?: number;
}

const MARGIN = { left: 64, right: 16, top: 14, bottom: 44 };

/** About `count` round tick values covering [min, max]. */
export function niceTicks(min: number, max: number, count = 5): number[] {
  if (!(max > min)) return [min];
  const raw = (max - min) / Math.max(1, count);
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((s) => s >= raw) ?? 10 * magnitude;
  const ticks: number[] = [];
  // Multiples of the step, rounded to 12 significant digits: 3 × 0.1 is 0.3, not 0.30000000000000004.
  for (let i = Math.ceil(min / step - 1e-9); i * step <= max + step * 1e-9; i++) ticks.push(i === 0 ? 0 : Number((i * step).toPrecision(12)));
  return ticks;
}

/** A tick label with as many decimals as the tick spacing needs. */
export function formatTick(value: number, step: number): string {
  if (value === 0) return '0';
  if (Math.abs(value) >= 1e5 || (step > 0 && step < 1e-3)) return value.toExponential(1);
  // Enough decimals to write the step exactly (0.25 → 2), so neighbouring ticks never read alike.
  let decimals = 0;
  while (decimals < 6 && step > 0 && Math.abs(Math.round(step * 10 ** decimals) - step * 10 ** decimals) > 1e-6) decimals += 1;
  return value.toFixed(decimals);
}

/** One chart as a <figure>: the SVG and its legend, or "not recorded" when no series has a value. */
export function lineChart(options: LineChartOptions): string {
  const width = options.widthPx ?? 460;
  const height = options.heightPx ?? 240;
  const caption = `<figcaption>${escapeHtml(options.title)}</figcaption>`;
  const values = options.series.flatMap((s) => s.points.flatMap((p) => (p.y === null || !Number.isFinite(p.y) ? [] : [p.y])));
  if (values.length === 0) {
    return `<figure class="chart" data-chart="${escapeHtml(options.id)}" data-empty="true">${caption}<p class="not-recorded">not recorded</p></figure>`;
  }
  const markers = options.markers ?? [];
  const xs = [...options.series.flatMap((s) => s.points.map((p) => p.x)), ...markers.map((m) => m.x)];
  let [xMin, xMax] = [minOf(xs), maxOf(xs)];
  if (xMax === xMin) [xMin, xMax] = [xMin - 1, xMax + 1];
  const ys = [...values, ...markers.map((m) => m.y)];
  let yMin = options.yMin ?? minOf(ys);
  let yMax = options.yMax ?? maxOf(ys);
  if (yMax <= yMin) {
    // A flat curve: open the range around it (upwards only when the bottom is fixed, as for rates).
    const pad = Math.abs(yMax) * 0.1 || 1;
    if (options.yMin === undefined) yMin -= pad;
    yMax = yMin + (options.yMin === undefined ? 2 * pad : pad);
  }
  const plotW = width - MARGIN.left - MARGIN.right;
  const plotH = height - MARGIN.top - MARGIN.bottom;
  const sx = (x: number): number => MARGIN.left + ((x - xMin) / (xMax - xMin)) * plotW;
  const sy = (y: number): number => MARGIN.top + (1 - (y - yMin) / (yMax - yMin)) * plotH;
  const f = (n: number): string => n.toFixed(1);
  const parts: string[] = [];

  const yTicks = niceTicks(yMin, yMax, 4);
  const yStep = yTicks.length > 1 ? (yTicks[1] as number) - (yTicks[0] as number) : 0;
  for (const t of yTicks) {
    parts.push(`<line class="grid" x1="${MARGIN.left}" x2="${width - MARGIN.right}" y1="${f(sy(t))}" y2="${f(sy(t))}"/>`);
    parts.push(`<text class="tick y-tick" x="${MARGIN.left - 6}" y="${f(sy(t) + 4)}" text-anchor="end">${escapeHtml(formatTick(t, yStep))}</text>`);
  }
  const xTicks = niceTicks(xMin, xMax, 6).filter((t) => Number.isInteger(t));
  for (const t of xTicks) {
    parts.push(`<text class="tick x-tick" x="${f(sx(t))}" y="${height - MARGIN.bottom + 16}" text-anchor="middle">${escapeHtml(String(t))}</text>`);
  }
  parts.push(`<line class="axis" x1="${MARGIN.left}" x2="${MARGIN.left}" y1="${MARGIN.top}" y2="${height - MARGIN.bottom}"/>`);
  parts.push(`<line class="axis" x1="${MARGIN.left}" x2="${width - MARGIN.right}" y1="${height - MARGIN.bottom}" y2="${height - MARGIN.bottom}"/>`);
  parts.push(`<text class="axis-label x-label" x="${f(MARGIN.left + plotW / 2)}" y="${height - 8}" text-anchor="middle">${escapeHtml(options.xLabel)}</text>`);
  parts.push(`<text class="axis-label y-label" transform="translate(14 ${f(MARGIN.top + plotH / 2)}) rotate(-90)" text-anchor="middle">${escapeHtml(options.yLabel)}</text>`);

  for (const series of options.series) {
    const segments: string[] = [];
    let pen = 'M';
    const dots: string[] = [];
    for (const p of [...series.points].sort((a, b) => a.x - b.x)) {
      if (p.y === null || !Number.isFinite(p.y)) {
        pen = 'M';
        continue;
      }
      segments.push(`${pen}${f(sx(p.x))} ${f(sy(p.y))}`);
      pen = 'L';
      if (series.points.length <= 60) dots.push(`<circle class="dot" cx="${f(sx(p.x))}" cy="${f(sy(p.y))}" r="2.2" fill="${escapeHtml(series.color)}"/>`);
    }
    parts.push(`<path class="series" data-series="${escapeHtml(series.name)}" d="${segments.join(' ')}" fill="none" stroke="${escapeHtml(series.color)}" stroke-width="1.8"/>`);
    appendAll(parts, dots);
  }
  for (const m of markers) {
    parts.push(
      `<g class="eval-marker" data-eval="${escapeHtml(m.label)}"><title>${escapeHtml(`${m.label}: ${m.y.toFixed(3)} at v${m.x}`)}</title>` +
        `<circle cx="${f(sx(m.x))}" cy="${f(sy(m.y))}" r="5.5" fill="#fff" stroke="${escapeHtml(m.color)}" stroke-width="2.5"/>` +
        `<text class="marker-label" x="${f(sx(m.x))}" y="${f(sy(m.y) - 9)}" text-anchor="middle">${escapeHtml(m.label)}</text></g>`,
    );
  }
  const legend = [
    ...options.series.map((s) => `<span class="key"><i style="background:${escapeHtml(s.color)}"></i>${escapeHtml(s.label)}</span>`),
    ...(markers.length > 0 ? ['<span class="key"><i class="ring"></i>held-out evaluation</span>'] : []),
  ].join('');
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="${escapeHtml(options.title)}">${parts.join('')}</svg>`;
  return `<figure class="chart" data-chart="${escapeHtml(options.id)}">${caption}${svg}<div class="legend">${legend}</div></figure>`;
}
