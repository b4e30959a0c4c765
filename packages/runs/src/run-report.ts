import { existsSync, readFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import type { TranscriptTurn } from '@sqlenv/agents';
import { RolloutRunSpecSchema, type RolloutRunSpec } from '@sqlenv/protocol';
import { checkFileOutput, maxOf, writeFileAtomic } from '@sqlenv/shared';
import { readRunMetrics } from './run-directory.ts';
import { REPORT_FILE, RUN_SPEC_FILE } from './run-files.ts';
import type { RunMetricsLine } from './run-metrics.ts';
import { pairedDifferenceOf, passAtKOf, readSavedEvals, successInterval, type SavedEval, type SavedEvalEpisode } from './saved-eval.ts';
import { escapeHtml as e, lineChart, type ChartMarker, type ChartSeries } from './svg-chart.ts';

/** Transcripts shown side by side (questions whose outcome changed first); the rest stay in evals/. */
const MAX_TRANSCRIPT_QUESTIONS = 12;
/** Characters of one observation or model text shown in a transcript. */
const MAX_TEXT_CHARS = 1_500;

const COLORS = { reward: '#1f6feb', success: '#1a7f37', format: '#cf222e', a: '#8250df', b: '#bf8700', c: '#0a7ea4', d: '#57606a', e: '#d1242f' };
const EVAL_COLORS = ['#111', '#e36209', '#6f42c1', '#0969da'];

export interface RunReportInput {
  title: string;
  metrics: readonly RunMetricsLine[];
  evals: readonly SavedEval[];
  spec?: RolloutRunSpec | null;
}

export function writeRunSpec(runDir: string, spec: RolloutRunSpec): void {
  writeFileAtomic(join(runDir, RUN_SPEC_FILE), `${JSON.stringify(spec, null, 2)}\n`);
}

function readRunSpec(runDir: string): RolloutRunSpec | null {
  const path = join(runDir, RUN_SPEC_FILE);
  if (!existsSync(path)) return null;
  const parsed = RolloutRunSpecSchema.safeParse(JSON.parse(readFileSync(path, 'utf8')));
  return parsed.success ? parsed.data : null;
}

/** Rebuild `runDir/report.html` from metrics.jsonl, evals/ and run.json; returns its path. */
export function writeRunReport(runDir: string): string {
  const path = join(runDir, REPORT_FILE);
  // Refused before the (possibly long) rendering: a directory in its place is an operator's mistake to name.
  checkFileOutput(path, { force: true });
  const html = renderRunReport({ title: basename(resolve(runDir)), metrics: readRunMetrics(runDir), evals: readSavedEvals(runDir), spec: readRunSpec(runDir) });
  return writeFileAtomic(path, html);
}

/** The before/after pair: evals named 'before' and 'after' when both exist, else the first and last by version. */
export function pickEvalPair(evals: readonly SavedEval[]): { before: SavedEval; after: SavedEval } | null {
  const named = (name: string): SavedEval | undefined => evals.find((x) => x.name === name);
  const before = named('before');
  const after = named('after');
  if (before && after) return { before, after };
  if (evals.length < 2) return null;
  return { before: evals[0] as SavedEval, after: evals.at(-1) as SavedEval };
}

const pct = (x: number): string => `${(x * 100).toFixed(1)} %`;
const num = (x: number | null | undefined, digits = 3): string => (x === null || x === undefined ? '—' : x.toFixed(digits));
const clip = (text: string): string => (text.length > MAX_TEXT_CHARS ? `${text.slice(0, MAX_TEXT_CHARS)}… (${text.length - MAX_TEXT_CHARS} more characters)` : text);

/** One self-contained HTML page: no script, no external resource (the CSP forbids loading any). */
export function renderRunReport(input: RunReportInput): string {
  const { metrics, evals } = input;
  const series = (name: string, label: string, color: string, pick: (m: RunMetricsLine) => number | null): ChartSeries => ({ name, label, color, points: metrics.map((m) => ({ x: m.version, y: pick(m) })) });
  const markers = (pick: (x: SavedEval) => number): ChartMarker[] => evals.map((x, i) => ({ x: x.version, y: pick(x), label: x.name, color: EVAL_COLORS[i % EVAL_COLORS.length] as string }));
  const x = 'policy version';
  const learner = (field: 'loss' | 'kl' | 'clip_fraction' | 'grad_norm' | 'learning_rate', title: string, color: string): string =>
    lineChart({ id: field, title, xLabel: x, yLabel: title, series: [series(field, title, color, (m) => m[field])] });
  const stalenessMean = (m: RunMetricsLine): number => {
    const entries = Object.entries(m.staleness_histogram);
    const n = entries.reduce((s, [, c]) => s + c, 0);
    return n === 0 ? 0 : entries.reduce((s, [k, c]) => s + Number(k) * c, 0) / n;
  };
  const stalenessMax = (m: RunMetricsLine): number => maxOf(Object.keys(m.staleness_histogram).map(Number), 0);
  const phases = [...new Set(metrics.flatMap((m) => Object.keys(m.phase_seconds)))];
  const phaseColors = [COLORS.a, COLORS.b, COLORS.c, COLORS.d, COLORS.e, COLORS.format];

  const sections = [
    header(input),
    `<section><h2>Training curves</h2><p class="note">One point per policy version: the batch the update trained on (its episodes were sampled by earlier versions). Rings: held-out evaluations, at the version each was taken.</p><div class="grid">`,
    lineChart({ id: 'reward', title: 'Reward (mean per episode)', xLabel: x, yLabel: 'reward', series: [series('reward_mean', 'training batch', COLORS.reward, (m) => m.reward_mean)], markers: markers((v) => v.mean_reward) }),
    lineChart({
      id: 'success',
      title: 'Success and format errors',
      xLabel: x,
      yLabel: 'fraction',
      yMin: 0,
      yMax: 1,
      series: [series('success_rate', 'success (training batch)', COLORS.success, (m) => m.success_rate), series('format_error_rate', 'format errors (share of steps)', COLORS.format, (m) => m.format_error_rate)],
      markers: markers((v) => v.success_rate),
    }),
    lineChart({ id: 'tokens', yMin: 0, title: 'Completion tokens per episode', xLabel: x, yLabel: 'tokens', series: [series('mean_tokens', 'tokens', COLORS.c, (m) => m.mean_tokens)] }),
    `</div></section><section><h2>Learner</h2>${nonFiniteNote(metrics)}<div class="grid">`,
    learner('loss', 'Loss', COLORS.a),
    learner('kl', 'KL (as the learner reports it)', COLORS.b),
    learner('clip_fraction', 'Clip fraction', COLORS.c),
    learner('grad_norm', 'Gradient norm', COLORS.d),
    learner('learning_rate', 'Learning rate', COLORS.e),
    `</div></section><section><h2>Sampler vs learner</h2>${mismatchNote(metrics)}<div class="grid">`,
    ...(['abs_logprob', 'k3'] as const).map((figure) =>
      lineChart({
        id: `mismatch_${figure}`,
        yMin: 0,
        title: figure === 'k3' ? 'k3: KL(sampler ‖ learner) estimate' : 'Mean |Δ log-prob| (loss tokens)',
        xLabel: x,
        yLabel: 'nats',
        series: [series(`mismatch_${figure}`, 'all tokens', COLORS.a, extraOf(`mismatch_${figure}`)), series(`mismatch_fresh_${figure}`, 'fresh tokens', COLORS.c, extraOf(`mismatch_fresh_${figure}`))],
      }),
    ),
    lineChart({
      id: 'importance',
      yMin: 0,
      title: 'Truncated importance weights',
      xLabel: x,
      yLabel: 'weight / fraction',
      series: [series('is_weight_mean', 'mean weight min(π_learner/π_sampler, C)', COLORS.d, extraOf('is_weight_mean')), series('truncated_fraction', 'share of tokens at C', COLORS.e, extraOf('truncated_fraction'))],
    }),
    `</div></section><section><h2>Throughput and staleness</h2><div class="grid">`,
    lineChart({ id: 'episodes_per_s', yMin: 0, title: 'Episodes per second', xLabel: x, yLabel: 'episodes/s', series: [series('episodes_per_s', 'trained episodes/s', COLORS.reward, (m) => m.episodes_per_s)] }),
    lineChart({ id: 'tokens_per_s', yMin: 0, title: 'Completion tokens per second', xLabel: x, yLabel: 'tokens/s', series: [series('tokens_per_s', 'tokens/s', COLORS.c, (m) => m.tokens_per_s)] }),
    lineChart({ id: 'staleness', yMin: 0, title: 'Staleness (versions behind)', xLabel: x, yLabel: 'versions', series: [series('staleness_mean', 'mean', COLORS.a, stalenessMean), series('staleness_max', 'max', COLORS.format, stalenessMax)] }),
    lineChart({ id: 'phases', yMin: 0, title: 'Trainer time per version, by phase', xLabel: x, yLabel: 'seconds', series: phases.map((p, i) => series(`phase_${p}`, p.replace('_', ' '), phaseColors[i % phaseColors.length] as string, (m) => m.phase_seconds[p] ?? null)) }),
    `</div>${stalenessTable(metrics)}</section>`,
    comparison(evals),
  ];
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Run report: ${e(input.title)}</title>
<style>${STYLE}</style></head>
<body>${sections.join('\n')}</body></html>
`;
}

/** "[31.2 %, 42.0 %]": the 95 % Wilson interval of an evaluation's success rate. */
function ci(saved: SavedEval): string {
  const [low, high] = successInterval(saved).ci95;
  return `<span class="ci" title="95 % Wilson interval">[${pct(low)}, ${pct(high)}]</span>`;
}

/** ", gold rows 36.7 %, 50.0 % of them answered right": how often the last query had the answer, and how often it was copied. */
function goldRows(saved: SavedEval): string {
  if (saved.gold_rows_rate === undefined || saved.gold_rows_rate === null) return '';
  const answered = saved.answer_given_gold_rows === null || saved.answer_given_gold_rows === undefined ? '' : `, ${pct(saved.answer_given_gold_rows)} of them answered right`;
  return `, <span title="episodes whose last query returned the gold rows">gold rows ${pct(saved.gold_rows_rate)}</span>${answered}`;
}

/** ", pass@1/4/8 14.0 % / 22.1 % / 26.7 %": questions solved by at least one of k samples (— where a question had fewer than k). */
function passAtK(saved: SavedEval): string {
  const entries = Object.entries(passAtKOf(saved));
  if (entries.length === 0) return '';
  return `, <span title="share of questions solved by at least one of k samples (unbiased estimate from every sample)">pass@${entries.map(([k]) => k).join('/')} ${entries.map(([, v]) => (v === null ? '—' : pct(v))).join(' / ')}</span>`;
}

/** The paired test: after − before over the shared episodes with its 95 % bootstrap interval over questions. */
function pairedTest(before: SavedEval, after: SavedEval): string {
  const paired = pairedDifferenceOf(before, after);
  if (paired === null) return `<p class="note">The two evaluations share no (question, seed) episode, so there is no paired difference.</p>`;
  const points = (x: number): string => `${x >= 0 ? '+' : '−'}${Math.abs(100 * x).toFixed(1)}`;
  const improved = paired.ci[0] > 0;
  return `<p data-paired="${improved ? 'improved' : 'not-improved'}">Paired difference ${e(after.name)} − ${e(before.name)}: <b>${points(paired.diff)} points</b> <span class="ci" title="95 % paired bootstrap over questions, ${paired.resamples} resamples">[${points(paired.ci[0])}, ${points(paired.ci[1])}]</span> over ${paired.episodes} episode pairs of ${paired.questions} questions — ${improved ? '<span class="ok">improved with 95 % confidence</span>' : 'not improved with 95 % confidence'}${paired.ci[1] < 0 ? ' (<span class="no">worse with 95 % confidence</span>)' : ''}.</p>`;
}

function header(input: RunReportInput): string {
  const { metrics, evals, spec } = input;
  const last = metrics.at(-1);
  const facts = [
    spec ? `${e(spec.policy)} policy on ${e(spec.dataset)} (${e(spec.split)} split), ${spec.episodes} episodes, G=${spec.group_size}, B=${spec.groups_per_batch}, max staleness ${spec.max_staleness}, seed ${spec.seed}` : null,
    last ? `${metrics.length} policy versions recorded, last v${last.version} after ${(last.time / 1000).toFixed(1)} s; last batch reward ${num(last.reward_mean)}, success ${pct(last.success_rate)}` : 'No policy version recorded yet (metrics.jsonl is empty or missing).',
    evals.length > 0 ? `Held-out evaluations: ${evals.map((v) => `${e(v.name)} (v${v.version}, ${v.episodes_count} episodes, success ${pct(v.success_rate)} ${ci(v)}${goldRows(v)}${passAtK(v)})`).join(', ')}` : 'No saved evaluations (evals/ is empty): sqlenv eval … --save-eval RUN_DIR --eval-name NAME adds one.',
  ].filter((f) => f !== null);
  return `<header><h1>Run report: ${e(input.title)}</h1>${facts.map((f) => `<p>${f}</p>`).join('')}</header>`;
}

const extraOf = (name: string) => (m: RunMetricsLine): number | null => m.extra[name] ?? null;

/** The mismatch in words: what r is, the last update's figures and the run's worst k3. */
function mismatchNote(metrics: readonly RunMetricsLine[]): string {
  const measured = metrics.filter((m) => m.extra['mismatch_k3'] !== undefined);
  const last = measured.at(-1);
  if (last === undefined) return `<p class="note">No mismatch recorded (a policy without a learner, or a run directory written before it was measured).</p>`;
  const worst = measured.reduce((a, b) => ((b.extra['mismatch_k3'] ?? 0) > (a.extra['mismatch_k3'] ?? 0) ? b : a));
  const fresh = last.extra['mismatch_fresh_k3'];
  return (
    `<p class="note">r = log π_learner − log π_sampler per loss token, the learner at the weights its update started from (a token an older version sampled carries its staleness too; "fresh" tokens were sampled with those very weights). k3 = mean of exp(r) − 1 − r estimates KL(sampler ‖ learner). docs/async-rl.md explains the weight.</p>` +
    `<p data-mismatch="last">Last update (v${last.version}): mean |Δ log-prob| ${num(extraOf('mismatch_abs_logprob')(last), 4)}, k3 ${num(extraOf('mismatch_k3')(last), 5)}${fresh === undefined ? '' : ` (fresh tokens ${num(fresh, 5)})`}, mean weight ${num(extraOf('is_weight_mean')(last), 4)} with cap C = ${num(extraOf('tis_cap')(last), 2)} (0: off), ${pct(extraOf('truncated_fraction')(last) ?? 0)} of tokens at C. Largest k3 of the run: ${num(extraOf('mismatch_k3')(worst), 5)} at v${worst.version}.</p>`
  );
}

function nonFiniteNote(metrics: readonly RunMetricsLine[]): string {
  const bad = metrics.filter((m) => m.non_finite.length > 0);
  if (bad.length === 0) return '';
  return `<p class="alarm">Non-finite learner numbers at ${bad.length} version(s), first v${bad[0]?.version}: ${e((bad[0]?.non_finite ?? []).join(', '))}</p>`;
}

function stalenessTable(metrics: readonly RunMetricsLine[]): string {
  const totals = new Map<number, number>();
  for (const m of metrics) for (const [k, c] of Object.entries(m.staleness_histogram)) totals.set(Number(k), (totals.get(Number(k)) ?? 0) + c);
  const all = [...totals.values()].reduce((a, b) => a + b, 0);
  if (all === 0) return '';
  const rows = [...totals.entries()].sort((a, b) => a[0] - b[0]).map(([k, c]) => `<tr><td>${k}</td><td>${c}</td><td>${pct(c / all)}</td></tr>`);
  return `<table class="compact" data-table="staleness"><caption>Trained episodes by staleness (whole run)</caption><thead><tr><th>versions behind</th><th>episodes</th><th>share</th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

interface Pair {
  key: string;
  before: SavedEvalEpisode | undefined;
  after: SavedEvalEpisode | undefined;
}

/** Episodes of two evaluations matched by question and seed. */
function pairEpisodes(before: SavedEval, after: SavedEval): Pair[] {
  const key = (ep: SavedEvalEpisode): string => `${ep.question_id}#${ep.seed}`;
  const afterByKey = new Map(after.episodes.map((ep) => [key(ep), ep]));
  const pairs: Pair[] = before.episodes.map((ep) => ({ key: key(ep), before: ep, after: afterByKey.get(key(ep)) }));
  const seen = new Set(pairs.map((p) => p.key));
  for (const ep of after.episodes) if (!seen.has(key(ep))) pairs.push({ key: key(ep), before: undefined, after: ep });
  return pairs;
}

function outcome(pair: Pair): 'gained' | 'lost' | 'both' | 'neither' | 'unmatched' {
  if (!pair.before || !pair.after) return 'unmatched';
  if (pair.after.correct && !pair.before.correct) return 'gained';
  if (!pair.after.correct && pair.before.correct) return 'lost';
  return pair.after.correct ? 'both' : 'neither';
}

function comparison(evals: readonly SavedEval[]): string {
  const picked = pickEvalPair(evals);
  if (!picked) return `<section><h2>Held-out questions, before vs after</h2><p class="note">Needs two saved evaluations (named 'before' and 'after', or any two at different versions); this run has ${evals.length}.</p></section>`;
  const { before, after } = picked;
  const pairs = pairEpisodes(before, after);
  const counts = { gained: 0, lost: 0, both: 0, neither: 0, unmatched: 0 };
  for (const p of pairs) counts[outcome(p)] += 1;
  const mark = (ep: SavedEvalEpisode | undefined): string => (ep === undefined ? '<td>—</td><td>—</td>' : `<td class="${ep.correct ? 'ok' : 'no'}">${ep.correct ? '✔' : '✘'}</td><td>${num(ep.reward)}</td>`);
  const rows = pairs.map((p) => {
    const ep = p.before ?? p.after;
    return `<tr data-outcome="${outcome(p)}"><td><code>${e(ep?.question_id ?? '')}</code></td><td>${ep?.seed ?? ''}</td><td class="question">${e(ep?.question ?? '')}</td>${mark(p.before)}${mark(p.after)}</tr>`;
  });
  const order = { gained: 0, lost: 1, neither: 2, both: 3, unmatched: 4 };
  const shown = [...pairs].filter((p) => p.before && p.after).sort((a, b) => order[outcome(a)] - order[outcome(b)]).slice(0, MAX_TRANSCRIPT_QUESTIONS);
  // Changed outcomes and the first few are open; the rest one click away.
  const transcripts = shown.map(
    (p, i) =>
      `<details class="pair" data-question="${e(p.key)}"${outcome(p) === 'gained' || outcome(p) === 'lost' || i < 3 ? ' open' : ''}><summary><b>${e(outcome(p))}</b> · <code>${e(p.before?.question_id ?? '')}</code> (seed ${p.before?.seed ?? ''}) — ${e(p.before?.question ?? '')}</summary>` +
      `<div class="sides">${side(`${before.name} (v${before.version})`, p.before)}${side(`${after.name} (v${after.version})`, p.after)}</div></details>`,
  );
  const more = pairs.length - shown.length;
  return `<section><h2>Held-out questions, before vs after</h2>
<p>${e(before.name)} (v${before.version}): ${pct(before.success_rate)} ${ci(before)} of ${before.episodes_count} · ${e(after.name)} (v${after.version}): ${pct(after.success_rate)} ${ci(after)} of ${after.episodes_count} · gained ${counts.gained}, lost ${counts.lost}, both right ${counts.both}, both wrong ${counts.neither}${counts.unmatched > 0 ? `, unmatched ${counts.unmatched}` : ''}</p>
${pairedTest(before, after)}
<table data-table="before-after"><thead><tr><th>question</th><th>seed</th><th>text</th><th colspan="2">${e(before.name)} v${before.version}</th><th colspan="2">${e(after.name)} v${after.version}</th></tr></thead><tbody>${rows.join('')}</tbody></table>
</section><section><h2>Transcripts, ${e(before.name)} vs ${e(after.name)}</h2><p class="note">The same questions and seeds played by both policies; changed outcomes first${more > 0 ? `; ${more} more in evals/${e(before.name)}.json and evals/${e(after.name)}.json` : ''}.</p>${transcripts.join('\n')}</section>`;
}

function side(label: string, ep: SavedEvalEpisode | undefined): string {
  if (!ep) return `<div class="side"><h3>${e(label)}</h3><p class="note">not played</p></div>`;
  const status = `${ep.correct ? 'correct' : 'not correct'}, reward ${num(ep.reward)}, ${ep.steps} steps${ep.format_errors > 0 ? `, ${ep.format_errors} format errors` : ''}${ep.error ? `, error: ${e(ep.error)}` : ''}`;
  return `<div class="side" data-side="${e(label)}"><h3>${e(label)}</h3><p class="status ${ep.correct ? 'ok' : 'no'}">${status}</p>${ep.transcript.map(turnHtml).join('')}</div>`;
}

function turnHtml(turn: TranscriptTurn): string {
  const text = turn.text === null ? '<p class="muted">text policy: no model text</p>' : `<pre class="model-text">${e(clip(turn.text))}</pre>`;
  let action: string;
  if (turn.stop !== null) action = `<p class="parse-error">stopped: ${e(turn.stop)}</p>`;
  else if (turn.action !== null) action = `<p class="action"><b>${e(turn.action.action_type)}</b> <code>${e(clip(turn.action.argument))}</code></p>`;
  else action = `<p class="parse-error">parse error: ${e(turn.parse_error ?? '')}</p>`;
  const observation = turn.reward === null ? '' : turn.error !== '' ? `<pre class="observation error">${e(clip(turn.error))}</pre>` : `<pre class="observation">${e(clip(turn.result))}</pre>`;
  return `<div class="turn"><div class="turn-head">turn ${turn.turn + 1} · v${turn.policy_version}${turn.reward === null ? '' : ` · reward ${num(turn.reward)}`}${turn.done ? ' · done' : ''}</div>${text}${action}${observation}</div>`;
}

const STYLE = `
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1f2328;margin:0 auto;max-width:1500px;padding:16px 24px;background:#fff}
h1{font-size:22px;margin:4px 0 8px}h2{font-size:18px;border-bottom:1px solid #d0d7de;padding-bottom:4px;margin-top:28px}h3{font-size:14px;margin:4px 0}
header p{margin:2px 0;color:#424a53}.note{color:#59636e}.alarm{color:#cf222e;font-weight:600}
.grid{display:flex;flex-wrap:wrap;gap:12px}
figure.chart{margin:0;border:1px solid #d0d7de;border-radius:6px;padding:6px 8px;background:#fff}
figure.chart figcaption{font-weight:600;margin-bottom:2px}
figure.chart[data-empty] {width:300px}.not-recorded{color:#8c959f;font-style:italic;margin:30px 0;text-align:center}
svg .grid{stroke:#eaeef2}svg .axis{stroke:#8c959f}svg text{font:11px system-ui,sans-serif;fill:#424a53}svg .axis-label{font-size:12px;fill:#1f2328}
svg .marker-label{font-size:10px;font-weight:600}
.legend{font-size:12px;color:#424a53}.key{margin-right:12px;white-space:nowrap}.key i{display:inline-block;width:14px;height:3px;vertical-align:middle;margin-right:4px}
.key i.ring{width:8px;height:8px;border:2px solid #111;border-radius:50%;background:#fff}
table{border-collapse:collapse;margin:8px 0;font-size:13px}td,th{border:1px solid #d0d7de;padding:3px 6px;text-align:left;vertical-align:top}th{background:#f6f8fa}
table caption{text-align:left;font-weight:600;padding:4px 0}td.question{max-width:520px}.ok{color:#1a7f37;font-weight:600}.no{color:#cf222e}
details.pair{border:1px solid #d0d7de;border-radius:6px;margin:8px 0;padding:4px 8px}details.pair summary{cursor:pointer}
.sides{display:grid;grid-template-columns:1fr 1fr;gap:12px}.side{min-width:0}
.turn{border-left:3px solid #d0d7de;padding:2px 8px;margin:6px 0}.turn-head{font-size:12px;color:#59636e}
pre{white-space:pre-wrap;word-break:break-word;margin:3px 0;padding:4px 6px;border-radius:4px;font:12px/1.35 ui-monospace,Menlo,Consolas,monospace}
pre.model-text{background:#f3f0ff}pre.observation{background:#f6f8fa}pre.observation.error,.parse-error{color:#cf222e}
p.action{margin:3px 0}.muted{color:#8c959f;font-style:italic;margin:2px 0}code{font:12px ui-monospace,Menlo,Consolas,monospace}
`;
